package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/babelagent/babel/audit"
)

func TestLoadOrCreateKeyCreatesAPrivateKeyAndItsPublicHalf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "audit.key")
	key, err := audit.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key mode %#o; want 0600", perm)
	}
	again, err := audit.LoadOrCreateKey(path)
	if err != nil || !again.Equal(key) {
		t.Fatalf("second load = %v; want the same key", err)
	}
	pub, err := audit.LoadPublicKey(audit.PublicKeyFile(path))
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("public key = %v; want the key's public half", err)
	}
}

func TestLoadOrCreateKeyRefusesAKeyOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.key")
	if _, err := audit.LoadOrCreateKey(path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := audit.LoadOrCreateKey(path); !errors.Is(err, audit.ErrKeyPermissions) {
			t.Fatalf("mode %#o: err = %v; want ErrKeyPermissions", mode, err)
		}
	}
}

func TestLoadOrCreateKeyRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.key")
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.LoadOrCreateKey(path); err == nil {
		t.Fatal("LoadOrCreateKey accepted garbage")
	}
}

func TestOpenRefusesAKeyInsideTheLogDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, keyPath := range []string{
		filepath.Join(dir, "audit.key"),
		filepath.Join(dir, "sub", "audit.key"),
	} {
		_, err := audit.Open(context.Background(), filepath.Join(dir, "audit.db"), &audit.Options{KeyPath: keyPath})
		if !errors.Is(err, audit.ErrKeyInLogDir) {
			t.Fatalf("key %s: err = %v; want ErrKeyInLogDir", keyPath, err)
		}
		if _, err := os.Stat(keyPath); err == nil {
			t.Fatalf("key %s was created before the refusal", keyPath)
		}
	}
}

func TestOpenRefusesAKeyReachedThroughASymlinkIntoTheLogDirectory(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip(err)
	}
	_, err := audit.Open(context.Background(), filepath.Join(dir, "audit.db"),
		&audit.Options{KeyPath: filepath.Join(link, "audit.key")})
	if !errors.Is(err, audit.ErrKeyInLogDir) {
		t.Fatalf("err = %v; want ErrKeyInLogDir", err)
	}
}

func TestOpenRequiresAKey(t *testing.T) {
	if _, err := audit.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), nil); err == nil {
		t.Fatal("Open without a key succeeded")
	}
}
