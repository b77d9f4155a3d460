//go:build !unix

package eino_test

import "time"

func cpuTime() time.Duration { return 0 }
