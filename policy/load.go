package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// maxDocSize bounds a policy document.
const maxDocSize = 1 << 20

// LoadError says what is wrong with a policy document and where.
type LoadError struct {
	File   string // the file, when loaded by LoadFile
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	Key    string // the offending key, e.g. roles.runner.allow[0].action; may be empty
	Msg    string
	Err    error // the underlying parser error, if any
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("policy")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ", column %d", e.Column)
		}
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Err }

// The document. Unknown keys anywhere are an error.
type rawPolicy struct {
	Version    int                     `yaml:"version"`
	Principals map[string]rawPrincipal `yaml:"principals"`
	Roles      map[string]rawRole      `yaml:"roles"`
}

type rawPrincipal struct {
	Kind  string   `yaml:"kind"`
	Roles []string `yaml:"roles"`
}

type rawRole struct {
	Allow       []rawGrant `yaml:"allow"`
	SelfApprove bool       `yaml:"self_approve"`
}

type rawGrant struct {
	Action  string   `yaml:"action"`
	Graphs  []string `yaml:"graphs"`
	AllRuns bool     `yaml:"all_runs"`
}

// Load builds a Policy from a YAML or JSON document:
//
//	version: 1                      # optional; 1 is the only version
//	principals:
//	  alice:  {roles: [operator]}
//	  ci-bot: {roles: [runner], kind: token}   # kind pins how the caller must be identified
//	roles:
//	  runner:   {allow: [{action: graph.run, graphs: ["triage", "report-*"]}, {action: run.read}]}
//	  operator: {allow: [{action: "*", all_runs: true}]}
//	  approver: {allow: [{action: approval.decide, graphs: ["*"]}], self_approve: false}
//
// A grant names one action or "*" (every action). graphs, a list of
// path.Match patterns, limits a grant to graph-scoped actions on matching
// graphs; without it the grant covers every graph. all_runs lets run.read
// and run.cancel reach runs other principals started (see AuthorizeRun).
// self_approve lets the role approve calls of untrusted runs its holder
// started (see CanApprove). A principal entry without kind matches callers
// of any kind but anonymous.
//
// Unknown keys, duplicate keys, unknown actions or roles, bad patterns and
// YAML anchors are errors; every error is a *LoadError naming the line or
// the key.
func Load(data []byte) (*Policy, error) {
	if len(data) > maxDocSize {
		return nil, &LoadError{Msg: fmt.Sprintf("document is larger than %d bytes", maxDocSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &LoadError{Msg: "document is empty"}
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(err)
	}
	if len(file.Docs) != 1 {
		return nil, &LoadError{Msg: fmt.Sprintf("want exactly one document, found %d", len(file.Docs))}
	}
	if file.Docs[0].Body == nil {
		return nil, &LoadError{Msg: "document is empty"}
	}
	if err := rejectAnchors(file.Docs[0].Body); err != nil {
		return nil, err
	}
	var raw rawPolicy
	if err := yaml.NodeToValue(file.Docs[0].Body, &raw, yaml.Strict()); err != nil {
		return nil, yamlError(err)
	}
	return compile(&raw, file)
}

// LoadFile loads the policy document at path, which the operator names
// explicitly: nothing is looked up in the working directory or anywhere
// else. The file must be a regular file that only its owner (the current
// user or root) can write; a policy anyone else can edit would grant them
// anything.
func LoadFile(name string) (*Policy, error) {
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := checkPolicyFile(fi); err != nil {
		return nil, &LoadError{File: name, Msg: err.Error()}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	pol, err := Load(data)
	if le := (*LoadError)(nil); errors.As(err, &le) {
		le.File = name
	}
	return pol, err
}

func checkPolicyFile(fi os.FileInfo) error {
	mode := fi.Mode()
	if !mode.IsRegular() {
		return errors.New("not a regular file")
	}
	if mode.Perm()&0o022 != 0 {
		return fmt.Errorf("mode %#o lets others change it; want no group or world write (chmod go-w)", uint32(mode.Perm()))
	}
	if uid, ok := fileOwner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not the current user (uid %d) or root", uid, os.Geteuid())
	}
	return nil
}

// yamlError turns a parser error into a *LoadError with its position.
func yamlError(err error) error {
	le := &LoadError{Msg: err.Error(), Err: err}
	var ye yaml.Error
	if errors.As(err, &ye) {
		le.Msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			le.Line, le.Column = tk.Position.Line, tk.Position.Column
		}
	}
	return le
}

type anchorFinder struct{ found ast.Node }

func (v *anchorFinder) Visit(n ast.Node) ast.Visitor {
	if v.found != nil {
		return nil
	}
	if t := n.Type(); t == ast.AnchorType || t == ast.AliasType {
		v.found = n
		return nil
	}
	return v
}

// rejectAnchors refuses anchors and aliases: a policy is read by people,
// and every grant should be written where it applies.
func rejectAnchors(body ast.Node) error {
	v := &anchorFinder{}
	ast.Walk(v, body)
	if v.found == nil {
		return nil
	}
	le := &LoadError{Msg: "YAML anchors and aliases are not allowed in a policy"}
	if tk := v.found.GetToken(); tk != nil && tk.Position != nil {
		le.Line, le.Column = tk.Position.Line, tk.Position.Column
	}
	return le
}

// compile validates raw and builds the immutable Policy. Errors name the
// key and, found in file, its line.
func compile(raw *rawPolicy, file *ast.File) (*Policy, error) {
	fail := func(msg string, key ...any) error {
		le := &LoadError{Msg: msg, Key: keyString(key)}
		if n := lookup(file, key); n != nil {
			if tk := n.GetToken(); tk != nil && tk.Position != nil {
				le.Line, le.Column = tk.Position.Line, tk.Position.Column
			}
		}
		return le
	}
	if raw.Version != 0 && raw.Version != 1 {
		return nil, fail(fmt.Sprintf("unsupported version %d (want 1)", raw.Version), "version")
	}
	roles := make(map[string][]grant, len(raw.Roles))
	for _, name := range sortedKeys(raw.Roles) {
		r := raw.Roles[name]
		if err := checkID(name); err != nil {
			return nil, fail("bad role name: "+err.Error(), "roles", name)
		}
		gs := make([]grant, 0, len(r.Allow))
		for i, g := range r.Allow {
			at := []any{"roles", name, "allow", i}
			a := Action(g.Action)
			switch {
			case g.Action == "":
				return nil, fail("missing action", at...)
			case a != "*" && !a.Valid():
				return nil, fail(fmt.Sprintf("unknown action %q (want one of %s, or \"*\")", g.Action, actionList()), append(at, "action")...)
			}
			if g.Graphs != nil {
				if len(g.Graphs) == 0 {
					return nil, fail("graphs is empty; leave it out to grant every graph", append(at, "graphs")...)
				}
				if a != "*" && !a.GraphScoped() {
					return nil, fail(fmt.Sprintf("graphs does not apply to action %s", a), append(at, "graphs")...)
				}
				for j, pat := range g.Graphs {
					if _, err := path.Match(pat, ""); err != nil || pat == "" {
						return nil, fail(fmt.Sprintf("bad graph pattern %q", pat), append(at, "graphs", j)...)
					}
				}
			}
			if g.AllRuns && a != "*" && a != ActionRunRead && a != ActionRunCancel {
				return nil, fail(fmt.Sprintf("all_runs does not apply to action %s", a), append(at, "all_runs")...)
			}
			gs = append(gs, grant{role: name, action: a, graphs: slices.Clone(g.Graphs),
				allRuns: g.AllRuns, selfApprove: r.SelfApprove})
		}
		roles[name] = gs
	}
	principals := make(map[string]entry, len(raw.Principals))
	for _, id := range sortedKeys(raw.Principals) {
		rp := raw.Principals[id]
		if err := checkID(id); err != nil {
			return nil, fail("bad principal id: "+err.Error(), "principals", id)
		}
		if rp.Kind != "" && !validKind(rp.Kind) {
			return nil, fail(fmt.Sprintf("unknown kind %q (want local, token, mcp, a2a or anonymous)", rp.Kind), "principals", id, "kind")
		}
		e := entry{kind: rp.Kind}
		for i, role := range rp.Roles {
			gs, ok := roles[role]
			if !ok {
				return nil, fail(fmt.Sprintf("unknown role %q", role), "principals", id, "roles", i)
			}
			e.grants = append(e.grants, gs...)
		}
		principals[id] = e
	}
	return &Policy{loaded: true, principals: principals}, nil
}

func actionList() string {
	var names []string
	for _, a := range Actions() {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keyString renders a key path: roles.runner.allow[0].action.
func keyString(key []any) string {
	var b strings.Builder
	for _, k := range key {
		switch k := k.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		case string:
			if strings.ContainsAny(k, ".[]\"") {
				fmt.Fprintf(&b, "[%q]", k)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		}
	}
	return b.String()
}

// lookup finds the node at key in file, or nil.
func lookup(file *ast.File, key []any) ast.Node {
	b := (&yaml.PathBuilder{}).Root()
	for _, k := range key {
		switch k := k.(type) {
		case int:
			b = b.Index(uint(k))
		case string:
			b = b.Child(k)
		}
	}
	n, err := b.Build().FilterFile(file)
	if err != nil {
		return nil
	}
	return n
}
