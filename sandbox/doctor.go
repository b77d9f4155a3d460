package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Check is one line of a Doctor report.
type Check struct {
	// Name is the sandbox kind ("wasm", "os") or a language on it
	// ("javascript", "python").
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Detail says what works, or why not.
	Detail string `json:"detail"`
}

// emptyCommand is the smallest WASI command: it exports a _start that
// returns at once.
func emptyCommand() []byte {
	return []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: func() -> ()
		0x03, 0x02, 0x01, 0x00, // func 0 has type 0
		0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // export "_start"
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: no locals, end
	}
}

// Doctor says which sandbox kinds and code languages are usable here, and
// why not, by starting each for real: bubblewrap missing, user namespaces
// refused and python3 missing all show. osOpts configures the os sandbox
// checked (nil: the defaults).
func Doctor(ctx context.Context, osOpts *OSOptions) []Check {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []Check

	w, err := NewWasm(ctx, nil)
	if err == nil {
		defer w.Close(context.WithoutCancel(ctx))
		var res *Result
		res, err = w.Run(ctx, WasmModule(emptyCommand()))
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("a trivial module exited with status %d", res.ExitCode)
		}
	}
	out = append(out, check("wasm", err, "wazero: WASI modules, no file system, no socket, memory capped per call"))
	jsErr := err
	if jsErr == nil && len(qjsModule) == 0 {
		jsErr = errors.New("the QuickJS module is not linked in")
	}
	out = append(out, check("javascript", jsErr, "QuickJS (fastschema/qjs) on the wasm sandbox; fetch, through the egress guard, only for code that declares egress"))

	o, err := NewOS(osOpts)
	if err == nil {
		var res *Result
		res, err = o.Run(ctx, &Spec{Program: "/bin/sh", Args: []string{"-c", "exit 0"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("a trivial program exited with status %d: %s", res.ExitCode, tail(res.Stderr, 200))
		}
	}
	osErr := err
	detail := "bubblewrap: no network, unprivileged user, no capability, seccomp, rlimits"
	if o != nil {
		detail = "bubblewrap at " + o.bwrap + ": no network, unprivileged user, no capability, seccomp, rlimits"
	}
	out = append(out, check("os", explainOS(osErr), detail))

	pyErr := osErr
	if pyErr == nil {
		var res *Result
		res, pyErr = o.Run(ctx, &Spec{Program: PythonPath, Args: []string{"--version"}})
		if pyErr == nil && res.ExitCode != 0 {
			pyErr = fmt.Errorf("%s is missing or broken (status %d): install python3", PythonPath, res.ExitCode)
		} else if pyErr == nil {
			detail = strings.TrimSpace(string(res.Stdout)) + " in the os sandbox"
		}
	} else {
		pyErr = errors.New("needs the os sandbox")
	}
	if pyErr != nil {
		detail = "python3 in the os sandbox"
	}
	out = append(out, check("python", pyErr, detail))
	return out
}

func check(name string, err error, detail string) Check {
	if err != nil {
		return Check{Name: name, OK: false, Detail: err.Error()}
	}
	return Check{Name: name, OK: true, Detail: detail}
}

// explainOS adds the likely cause to a failure to start bubblewrap.
func explainOS(err error) error {
	var se *SetupError
	if !errors.As(err, &se) {
		return err
	}
	r := se.Reason
	switch {
	case strings.Contains(r, "not usable at"):
		return fmt.Errorf("%w (install bubblewrap: apt-get install -y bubblewrap)", err)
	case strings.Contains(r, "namespace") || strings.Contains(r, "Operation not permitted") || strings.Contains(r, "Permission denied"):
		return fmt.Errorf("%w (unprivileged user namespaces look refused: check kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor userns restriction)", err)
	}
	return err
}
