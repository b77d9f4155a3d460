package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxFileSize bounds a secrets file; anything larger is a mistake.
const maxFileSize = 1 << 20

// File is a Source over a secrets file the operator names explicitly. The
// file is either a JSON object of string values or KEY=VALUE lines:
//
//	# comment
//	OPENAI_API_KEY=sk-...
//	export GITHUB_TOKEN="ghp_..."   # "export " is allowed; so are quotes
//
// Double-quoted values are unquoted as Go strings; single-quoted values are
// taken literally; unquoted values are trimmed and taken literally (a '#'
// inside one is part of the value). A duplicate key is an error.
//
// The file is read on every Lookup, so rotation needs no restart. It must be
// a regular file with mode 0600 or stricter, owned by the current user;
// anything else is refused with an *InsecureFileError. Errors name the file
// and the line, never a value.
type File struct {
	path string
}

// NewFile returns a File source reading path. A relative path is made
// absolute against the working directory at the time of the call, so that
// errors name the file that was actually meant.
func NewFile(path string) *File {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return &File{path: path}
}

// InsecureFileError says that a secrets file may be read or changed by
// someone other than the current user, so it is not used.
type InsecureFileError struct {
	Path   string
	Mode   fs.FileMode
	Reason string
}

func (e *InsecureFileError) Error() string {
	return fmt.Sprintf("secrets file %s (mode %#o) refused: %s", e.Path, uint32(e.Mode.Perm()), e.Reason)
}

// Lookup reads the file and returns the secret named name.
func (f *File) Lookup(ctx context.Context, name string) (Secret, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return Secret{}, err
	}
	vals, err := f.load()
	if err != nil {
		return Secret{}, err
	}
	if v, ok := vals[name]; ok && v != "" {
		return New(name, v), nil
	}
	return Secret{}, &NotFoundError{Name: name, Source: f.String()}
}

func (f *File) String() string { return "file " + f.path }

// load opens the file, checks the open descriptor (not the path, so a swap
// between check and read cannot slip a different file in), and parses it.
func (f *File) load() (map[string]string, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("secrets file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("secrets file: %w", err)
	}
	if err := checkFileInfo(f.path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("secrets file %s: %w", f.path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("secrets file %s is larger than %d bytes", f.path, maxFileSize)
	}
	vals, err := parseSecretsFile(data)
	if err != nil {
		return nil, fmt.Errorf("secrets file %s: %w", f.path, err)
	}
	return vals, nil
}

func checkFileInfo(path string, fi fs.FileInfo) error {
	mode := fi.Mode()
	if !mode.IsRegular() {
		return &InsecureFileError{Path: path, Mode: mode, Reason: "not a regular file"}
	}
	if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || mode.Perm()&^0o600 != 0 {
		return &InsecureFileError{Path: path, Mode: mode,
			Reason: fmt.Sprintf("mode must be 0600 or stricter (run: chmod 600 %s)", path)}
	}
	uid, ok := fileOwner(fi)
	if !ok {
		return &InsecureFileError{Path: path, Mode: mode, Reason: "cannot verify the file's owner on this platform"}
	}
	if me := os.Geteuid(); uid != me {
		return &InsecureFileError{Path: path, Mode: mode,
			Reason: fmt.Sprintf("owned by uid %d, not the current user (uid %d)", uid, me)}
	}
	return nil
}

// parseSecretsFile reads a JSON object or KEY=VALUE lines. Its errors name
// lines and keys, never values.
func parseSecretsFile(data []byte) (map[string]string, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return parseJSONSecrets(trimmed)
	}
	vals := make(map[string]string)
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want KEY=VALUE", n)
		}
		k = strings.TrimSpace(k)
		if CheckName(k) != nil {
			// Not echoed: a malformed line may be a pasted value.
			return nil, fmt.Errorf("line %d: invalid key: want letters, digits and underscores, not starting with a digit", n)
		}
		if _, dup := vals[k]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %s", n, k)
		}
		v = strings.TrimSpace(v)
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			u, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("line %d: key %s: malformed double-quoted value", n, k)
			}
			v = u
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		case strings.HasPrefix(v, `"`) || strings.HasPrefix(v, `'`):
			return nil, fmt.Errorf("line %d: key %s: unterminated quoted value", n, k)
		}
		vals[k] = v
	}
	return vals, nil
}

func parseJSONSecrets(data []byte) (map[string]string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, fmt.Errorf("line %d: malformed JSON", line)
		}
		return nil, errors.New("malformed JSON: want an object of string values")
	}
	vals := make(map[string]string, len(raw))
	for k, rv := range raw {
		if CheckName(k) != nil {
			return nil, errors.New("invalid key: want letters, digits and underscores, not starting with a digit")
		}
		var s string
		if err := json.Unmarshal(rv, &s); err != nil {
			return nil, fmt.Errorf("key %s: value must be a string", k)
		}
		vals[k] = s
	}
	return vals, nil
}

var _ Source = (*File)(nil)
