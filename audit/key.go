package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrKeyPermissions is wrapped by the error LoadOrCreateKey returns for a
// key file that group or others may read or write.
var ErrKeyPermissions = errors.New("audit: signing key file is accessible to group or others")

// ErrKeyInLogDir is wrapped by the error Open returns when the signing key
// would live in the log's own directory, where anything that can reach the
// log could also take the key and re-sign a doctored log.
var ErrKeyInLogDir = errors.New("audit: signing key must not live in the audit log's directory")

// PublicKeyFile is the file beside a signing key that holds its public half,
// which is all Verify needs.
func PublicKeyFile(keyPath string) string { return keyPath + ".pub" }

// LoadOrCreateKey returns the ed25519 signing key stored at path, creating it
// (mode 0600, in a directory created 0700 if missing) when there is none, and
// writing its public half to PublicKeyFile(path). It refuses a key file whose
// mode grants any permission to group or others (see ErrKeyPermissions).
// The file is PEM: a PKCS #8 "PRIVATE KEY" block.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, errors.New("audit: empty signing key path")
	}
	key, err := loadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(path)
	}
	if err != nil {
		return nil, err
	}
	if err := ensurePublicKey(PublicKeyFile(path), key.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	return key, nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // fs.ErrNotExist is how the caller knows to create one
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("audit: signing key %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o; run chmod 600 on it", ErrKeyPermissions, path, perm)
	}
	b, err := readLimited(f, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit: signing key %s: not a PEM PRIVATE KEY block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: signing key %s: not an ed25519 key", path)
	}
	return key, nil
}

func createKey(path string) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: signing key directory: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit: generating signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("audit: encoding signing key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// O_EXCL: if another process created the key meanwhile, use theirs.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: creating signing key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("audit: writing signing key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("audit: writing signing key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("audit: writing signing key: %w", err)
	}
	return key, nil
}

func encodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ensurePublicKey writes pub to path, or checks that the file there already
// holds pub: a .pub that disagrees with its key would make every verify fail
// for a reason nobody would guess.
func ensurePublicKey(path string, pub ed25519.PublicKey) error {
	existing, err := LoadPublicKey(path)
	if err == nil {
		if !existing.Equal(pub) {
			return fmt.Errorf("audit: public key %s does not match its signing key", path)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data, err := encodePublicKey(pub)
	if err != nil {
		return fmt.Errorf("audit: encoding public key: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("audit: writing public key: %w", err)
	}
	return nil
}

// LoadPublicKey reads a PEM "PUBLIC KEY" (PKIX) ed25519 public key, as
// written to PublicKeyFile by LoadOrCreateKey.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: public key: %w", err)
	}
	defer f.Close()
	b, err := readLimited(f, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("audit: public key %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("audit: public key %s: not a PEM PUBLIC KEY block", path)
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: public key %s: %w", path, err)
	}
	pub, ok := parsed.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("audit: public key %s: not an ed25519 key", path)
	}
	return pub, nil
}

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// keyInsideDir reports whether keyPath lies in dir or below it, comparing
// paths with symlinks resolved where they exist.
func keyInsideDir(keyPath, dir string) (bool, error) {
	k, err := resolvePath(keyPath)
	if err != nil {
		return false, err
	}
	d, err := resolvePath(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(d, filepath.Dir(k))
	if err != nil {
		return false, nil // different volumes: not inside
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))), nil
}

// resolvePath makes p absolute and resolves symlinks in the longest prefix of
// it that exists.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	var tail []string
	cur := abs
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{r}, tail...)...), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		tail = append([]string{filepath.Base(cur)}, tail...)
		cur = parent
	}
}
