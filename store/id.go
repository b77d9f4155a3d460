package store

import (
	"crypto/rand"
	"encoding/hex"
)

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
