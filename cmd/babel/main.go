// Command babel runs, checks and serves Babelagent graphs.
package main

import (
	"fmt"
	"os"
)

// Exit codes (a contract, see README).
const (
	exitOK       = 0
	exitFailed   = 1
	exitBadInput = 2
	exitDenied   = 3
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func badInput(err error) error { return &exitError{code: exitBadInput, err: err} }

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
