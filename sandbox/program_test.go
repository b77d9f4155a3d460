package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestHostProgramRunsUsrInPlaceAndCopiesTheRest(t *testing.T) {
	t.Parallel()
	// /bin/sh resolves into /usr (on a merged-/usr system): it runs in place.
	prog, files, err := HostProgram("/bin/sh")
	if err != nil || !strings.HasPrefix(prog, "/usr/") || len(files) != 0 {
		t.Fatalf("/bin/sh: %q %+v %v; want it run in place under /usr", prog, files, err)
	}

	dir := t.TempDir()
	script := filepath.Join(dir, "hello.sh")
	body := "#!/bin/sh\necho \"hi from $0\"\ntest -e " + dir + " && echo 'sees the host directory'\necho changed > \"$0\" 2>/dev/null && echo 'wrote itself'\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	prog, files, err = HostProgram(script)
	if err != nil {
		t.Fatal(err)
	}
	if prog != WorkDir+"/hello.sh" || len(files) != 1 || files[0].Host != script || !files[0].Executable || files[0].Data != nil {
		t.Fatalf("HostProgram(%s) = %q %+v", script, prog, files)
	}
	res := mustRun(t, &Spec{Program: prog, Files: files})
	if got := string(res.Stdout); got != "hi from /work/hello.sh\n" || res.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q status %d: want only the greeting", got, res.Stderr, res.ExitCode)
	}
	if b, _ := os.ReadFile(script); string(b) != body {
		t.Fatalf("the sandbox changed the host's copy of its program")
	}
}

func TestHostProgramRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"relative/prog":             "absolute",
		"/usr/bin/../bin/sh":        "clean absolute",
		filepath.Join(dir, "none"):  "no such file",
		dir:                         "not a regular file",
		plain:                       "not executable",
		"/usr/bin/no-such-program1": "no such file",
	} {
		if _, _, err := HostProgram(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("HostProgram(%q): %v; want an error saying %q", path, err, want)
		}
	}
	if _, _, err := HostProgram(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing program: %v; want fs.ErrNotExist", err)
	}
}

func TestOSRefusesAHostFileItCannotPlace(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opening a FIFO must neither block nor copy it.
	_, err := runOS(t, &Spec{Program: "/bin/true", Files: []File{{Name: "f", Host: fifo}}})
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err = %v, want a *SetupError saying it is not a regular file", err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runOS(t, &Spec{Program: WorkDir + "/plain", Files: []File{{Name: "plain", Host: plain, Executable: true}}}); !errors.As(err, &se) || !strings.Contains(err.Error(), "not executable") {
		t.Fatalf("err = %v, want a *SetupError saying the program is not executable", err)
	}
	for _, f := range []File{{Name: "f", Host: "relative"}, {Name: "f", Host: "/bin/true", Data: []byte("x")}} {
		var spe *SpecError
		if _, err := runOS(t, &Spec{Program: "/bin/true", Files: []File{f}}); !errors.As(err, &spe) {
			t.Errorf("file %+v: err = %v, want a *SpecError", f, err)
		}
	}
}
