package catalog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/adapter/process"
	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/egress"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/sandbox"
)

// Kinds this package registers itself.
const (
	// KindCode runs code in a sandbox:
	// {code: {lang: js|python|wasm, source: "..." | file: "path"}}.
	KindCode = "code"
	// KindProcess runs a program in the os sandbox:
	// {process: {program: /usr/bin/x, args: [...]}}.
	KindProcess = "process"
)

// maxCodeFile bounds a code node's file.
const maxCodeFile = 16 << 20

type codeConfig struct {
	Lang   string  `json:"lang"`
	Source *string `json:"source"`
	File   string  `json:"file"`
}

// codeAgent builds a code node: its source, given inline or read (when the
// graph is compiled) from a file relative to dir, runs on each call in the
// sandbox its language needs, with the node's declared secrets as its only
// environment.
func codeAgent(ref graph.Ref, dir string, sbs *lazySandboxes) (agent.Agent, error) {
	if ref.Target != "" {
		return nil, errors.New("want {code: {lang: js|python|wasm, source: \"...\"}} or {code: {file: path}}")
	}
	var cfg codeConfig
	if err := httpadapter.DecodeConfig(ref.Config, &cfg); err != nil {
		return nil, err
	}
	langName := cfg.Lang
	if langName == "" && cfg.File != "" {
		langName = langOfFile(cfg.File)
	}
	if langName == "" {
		return nil, errors.New("no lang: say which language the code is in (js, python or wasm)")
	}
	lang, err := sandbox.ParseLang(langName)
	if err != nil {
		return nil, err
	}
	var source []byte
	switch {
	case cfg.Source != nil && cfg.File != "":
		return nil, errors.New("give source or file, not both")
	case cfg.Source != nil:
		if lang == sandbox.LangWasm {
			return nil, errors.New("a wasm module is binary: give it as a file, not as source")
		}
		if strings.TrimSpace(*cfg.Source) == "" {
			return nil, errors.New("source is empty")
		}
		source = []byte(*cfg.Source)
	case cfg.File != "":
		if source, err = readTopologyFile(dir, cfg.File); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("no code: give source (inline) or file (a path relative to the topology)")
	}
	kind, _, err := sandbox.Code(lang, nil)
	if err != nil {
		return nil, err
	}
	sb, err := sbs.forKind(kind)
	if err != nil {
		return nil, err
	}
	eg := nodeEgress(ref)
	if eg != nil && lang == sandbox.LangWasm {
		return nil, errors.New("a wasm module has no network (no sockets, no fetch): remove egress and allow_private from this node, or write it in javascript or python")
	}
	return sandbox.CodeAgent(lang, string(source), &sandbox.CodeOptions{
		Secrets:   nodeSecrets(ref),
		Sandboxes: sb,
		Egress:    eg,
	})
}

func langOfFile(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".js", ".mjs":
		return "js"
	case ".py":
		return "python"
	case ".wasm":
		return "wasm"
	}
	return ""
}

// resolve turns a path written in a topology into a host path: an absolute
// path stays as it is, a relative one resolves against the topology's
// directory, and without that directory it is an error — never a path
// relative to the working directory.
func resolve(dir, name string) (string, error) {
	switch {
	case name == "" || strings.ContainsRune(name, 0):
		return "", fmt.Errorf("path %q: want a file name", name)
	case filepath.IsAbs(name):
		return filepath.Clean(name), nil
	case dir == "":
		return "", fmt.Errorf("path %q is relative, and the topology's directory is not known (catalog.Options.Dir): it is never resolved against the working directory", name)
	}
	abs, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("path %q: %w", name, err)
	}
	return abs, nil
}

// readTopologyFile reads a file a topology names, up to maxCodeFile bytes.
func readTopologyFile(dir, name string) ([]byte, error) {
	path, err := resolve(dir, name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", name, errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("file %s: %w", name, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("file %s is not a regular file", name)
	case fi.Size() > maxCodeFile:
		return nil, fmt.Errorf("file %s is %d bytes; the limit is %d", name, fi.Size(), maxCodeFile)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("file %s: %w", name, err)
	}
	return data, nil
}

type processConfig struct {
	Program string   `json:"program"`
	Args    []string `json:"args"`
}

// processAgent builds a process node: the program (an absolute path, or
// one relative to the topology's directory) runs in the os sandbox on each
// call, reading the input message on stdin and writing its output message
// on stdout (see package process).
func processAgent(ref graph.Ref, dir string, sbs *lazySandboxes) (agent.Agent, error) {
	var cfg processConfig
	if err := httpadapter.DecodeConfig(ref.Config, &cfg); err != nil {
		return nil, err
	}
	if t := strings.TrimSpace(ref.Target); t != "" {
		if cfg.Program != "" {
			return nil, errors.New("the program is given twice (as a string and in program:)")
		}
		fields := strings.Fields(t)
		cfg.Program, cfg.Args = fields[0], append(fields[1:], cfg.Args...)
	}
	if cfg.Program == "" {
		return nil, errors.New("no program: want {process: {program: /absolute/path, args: [...]}}")
	}
	program, err := resolve(dir, cfg.Program)
	if err != nil {
		return nil, err
	}
	o, err := sbs.osSandbox()
	if err != nil {
		return nil, err
	}
	name := "process"
	if ref.Node != nil && ref.Node.Name != "" {
		name = ref.Node.Name
	}
	return process.New(name, program, &process.Options{Args: cfg.Args, Secrets: nodeSecrets(ref), Sandbox: o, Egress: nodeEgress(ref)})
}

// nodeSecrets are the secrets the node declares: the only environment its
// code or program gets.
func nodeSecrets(ref graph.Ref) []string {
	if ref.Node == nil {
		return nil
	}
	return append([]string(nil), ref.Node.Secrets...)
}

// nodeEgress is the network a code or process node declares: its egress
// hosts and allow_private targets, decided by the egress guard in the
// sandbox's proxy (os sandbox) or behind fetch (JavaScript). A node that declares neither gets no network: nil, so
// no proxy, no socket and no proxy variable.
func nodeEgress(ref graph.Ref) *egress.Options {
	if ref.Node == nil || len(ref.Node.Egress) == 0 && len(ref.Node.AllowPrivate) == 0 {
		return nil
	}
	return &egress.Options{
		Allowlist:    append([]string(nil), ref.Node.Egress...),
		AllowPrivate: append([]string(nil), ref.Node.AllowPrivate...),
	}
}
