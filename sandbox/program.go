package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HostProgram says how the os sandbox runs the host program at path (a
// clean absolute path): the Program of a Spec, and the Files to add to it.
//
// A program that lies under /usr (once symbolic links are resolved) runs in
// place, by its resolved path, since the sandbox sees /usr read-only; it
// needs no file. Any other program is copied, read-only and executable, to
// WorkDir/NAME (NAME being path's last element) when the sandbox starts
// (File.Host), so the sandbox needs no view of the rest of the host's
// files. Such a program must be self-contained: a static binary, a dynamic
// one whose libraries are under /usr, or a script whose interpreter is.
//
// HostProgram checks that path names an executable regular file. It reads
// nothing else, and it never looks a program up in PATH.
func HostProgram(path string) (program string, files []File, err error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0) {
		return "", nil, &SpecError{Field: "Program", Reason: fmt.Sprintf("%q: want a clean absolute host path", path)}
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, fmt.Errorf("program %s: %w", path, unwrapPath(err))
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", nil, fmt.Errorf("program %s: %w", path, unwrapPath(err))
	}
	switch {
	case !fi.Mode().IsRegular():
		return "", nil, fmt.Errorf("program %s is not a regular file", path)
	case fi.Mode().Perm()&0o111 == 0:
		return "", nil, fmt.Errorf("program %s is not executable", path)
	}
	if strings.HasPrefix(resolved, "/usr/") {
		return resolved, nil, nil
	}
	name := filepath.Base(path)
	return WorkDir + "/" + name, []File{{Name: name, Host: resolved, Executable: true}}, nil
}

// unwrapPath drops the operation and path of a *fs.PathError, which the
// caller's message already names.
func unwrapPath(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
