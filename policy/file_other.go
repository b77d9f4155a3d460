//go:build !unix

package policy

import "io/fs"

// fileOwner cannot tell a file's owner here; LoadFile then relies on the
// mode check alone.
func fileOwner(fs.FileInfo) (uid int, ok bool) { return -1, false }
