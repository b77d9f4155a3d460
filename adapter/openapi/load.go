package openapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	httpadapter "github.com/babelagent/babel/adapter/http"
	"github.com/babelagent/babel/graph"
)

// DigestMismatchError says a pinned document changed.
type DigestMismatchError struct {
	Spec   string // the document's path or URL (without query)
	Pinned string
	Actual string
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("spec %s: digest mismatch: the topology pins %s but the document is %s; the document changed — review it, then update digest:", e.Spec, e.Pinned, e.Actual)
}

// Digest returns the pin of a document's bytes: "sha256:" and 64 hex digits.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func checkDigest(spec, pinned string, data []byte, remote bool) error {
	actual := Digest(data)
	if pinned == "" {
		if remote {
			return fmt.Errorf("spec %s is fetched over the network and must be pinned: add digest: %q after reviewing it", spec, actual)
		}
		return nil
	}
	hexPart, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(pinned)), "sha256:")
	if b, err := hex.DecodeString(hexPart); !ok || err != nil || len(b) != sha256.Size {
		return fmt.Errorf("digest %q: want sha256: followed by 64 hex digits", pinned)
	}
	if "sha256:"+hexPart != actual {
		return &DigestMismatchError{Spec: spec, Pinned: "sha256:" + hexPart, Actual: actual}
	}
	return nil
}

// readSpec reads the document: a URL through the egress guard, or a file.
// It returns the bytes, the document's own URL (for a relative server URL)
// and the name to show in errors.
func readSpec(cfg *Config, opts *Options, node *graph.NodeSpec) ([]byte, *url.URL, string, error) {
	spec := strings.TrimSpace(cfg.Spec)
	if spec == "" {
		return nil, nil, "", errors.New("spec is missing: give the document's path or https URL")
	}
	limit := opts.MaxSpecBytes
	if limit <= 0 {
		limit = DefaultMaxSpecBytes
	}
	if strings.Contains(spec, "://") {
		u, err := httpadapter.ParseURL(spec)
		if err != nil {
			return nil, nil, "", fmt.Errorf("spec: %w", err)
		}
		shown := httpadapter.Redacted(u)
		client, _, err := httpadapter.Egress(opts.Egress, node, u.String())
		if err != nil {
			return nil, nil, "", fmt.Errorf("spec %s: %w", shown, err)
		}
		defer client.CloseIdleConnections()
		timeout := opts.FetchTimeout
		if timeout <= 0 {
			timeout = DefaultFetchTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, nil, "", fmt.Errorf("spec %s: %w", shown, err)
		}
		req.Header.Set("Accept", "application/yaml, application/json;q=0.9, */*;q=0.5")
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, "", fmt.Errorf("spec %s: %w", shown, httpadapter.RequestError(ctx, "openapi "+u.Host, err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, nil, "", fmt.Errorf("spec %s: %w", shown, httpadapter.StatusError("openapi "+u.Host, resp.StatusCode))
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, nil, "", fmt.Errorf("spec %s: %w", shown, httpadapter.RequestError(ctx, "openapi "+u.Host, err))
		}
		if int64(len(data)) > limit {
			return nil, nil, "", fmt.Errorf("spec %s is larger than %d bytes", shown, limit)
		}
		return data, u, shown, nil
	}
	path := spec
	if !filepath.IsAbs(path) {
		if opts.Dir == "" {
			// Never the working directory: a relative path needs the
			// topology's own directory.
			return nil, nil, "", fmt.Errorf("spec %s: a relative path needs the topology file's directory; give an absolute path", spec)
		}
		path = filepath.Join(opts.Dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("spec %s: %w", spec, errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, "", fmt.Errorf("spec %s is not a regular file", spec)
	}
	if fi.Size() > limit {
		return nil, nil, "", fmt.Errorf("spec %s is %d bytes; the limit is %d", spec, fi.Size(), limit)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("spec %s: %w", spec, errors.Unwrap(err))
	}
	return data, nil, spec, nil
}

// parse loads an OpenAPI 3.x document. It never reads anything the
// document refers to: a $ref must point inside it.
func parse(name string, data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		return nil, fmt.Errorf("reference to %s refused: the document must be self-contained", httpadapter.Redacted(u))
	}
	loader.Context = context.Background()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("spec %s: %s", name, firstLine(err.Error()))
	}
	if doc.OpenAPI == "" {
		return nil, fmt.Errorf("spec %s has no openapi: version (a Swagger 2.0 document must be converted to OpenAPI 3)", name)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, fmt.Errorf("spec %s: openapi %q is not a 3.x version", name, doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("spec %s is not a valid OpenAPI document: %s", name, firstLine(err.Error()))
	}
	return doc, nil
}

// operation finds the operation with id opID.
func operation(doc *openapi3.T, name, opID string) (path, method string, item *openapi3.PathItem, op *openapi3.Operation, err error) {
	var ids []string
	if doc.Paths != nil {
		paths := doc.Paths.Map()
		keys := make([]string, 0, len(paths))
		for k := range paths {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, p := range keys {
			pi := paths[p]
			for m, o := range pi.Operations() {
				if o.OperationID == opID {
					return p, m, pi, o, nil
				}
				if o.OperationID != "" {
					ids = append(ids, o.OperationID)
				}
			}
		}
	}
	sort.Strings(ids)
	if opID == "" {
		return "", "", nil, nil, fmt.Errorf("operation is missing (the document has: %s)", list(ids))
	}
	return "", "", nil, nil, fmt.Errorf("spec %s has no operation %q (it has: %s)", name, opID, list(ids))
}

func list(ids []string) string {
	switch {
	case len(ids) == 0:
		return "no operations with an operationId"
	case len(ids) > 20:
		return strings.Join(ids[:20], ", ") + fmt.Sprintf(" and %d more", len(ids)-20)
	}
	return strings.Join(ids, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// serverURL is where the operation is sent: server: from the node's
// configuration, else the operation's, path's or document's first server,
// with its variables at their defaults. A relative server URL resolves
// against the document's URL; a local document needs an absolute one.
func serverURL(cfg *Config, doc *openapi3.T, item *openapi3.PathItem, op *openapi3.Operation, specURL *url.URL) (string, error) {
	if cfg.Server != "" {
		return strings.TrimRight(cfg.Server, "/"), nil
	}
	servers := doc.Servers
	if item.Servers != nil && len(item.Servers) > 0 {
		servers = item.Servers
	}
	if op.Servers != nil && len(*op.Servers) > 0 {
		servers = *op.Servers
	}
	raw := "/"
	if len(servers) > 0 && servers[0] != nil {
		s := servers[0]
		raw = s.URL
		for name, v := range s.Variables {
			if v == nil {
				continue
			}
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
		if strings.ContainsAny(raw, "{}") {
			return "", fmt.Errorf("server url %q has a variable without a default; set server: in the node's configuration", s.URL)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("server url %q is malformed", raw)
	}
	if !u.IsAbs() {
		if specURL == nil {
			return "", fmt.Errorf("the document's server url %q is relative and the document is a local file: set server: in the node's configuration", raw)
		}
		u = specURL.ResolveReference(u)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
