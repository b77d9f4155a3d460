package main

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
