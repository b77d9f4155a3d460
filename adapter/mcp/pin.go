package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/babelagent/babel/agent"
)

// pinDomain separates pin digests from any other sha256 of the same bytes,
// and versions the pinned form.
const pinDomain = "babel/mcp-tools/v1\n"

// toolDef is what a pin covers of one tool: everything that tells a model
// or a person what the tool is and takes. _meta and icons are left out.
type toolDef struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Pin connects to the server cfg describes, reads its tool list and returns
// the digest to configure as the node's pin. It does not check cfg.Pin. A
// stdio server is started with the secrets ctx carries (agent.WithSecrets),
// and none otherwise.
//
// Pin is for the person reviewing a server (`babel mcp pin`): it trusts
// nothing, and calls no tool.
func Pin(ctx context.Context, cfg *Config) (string, error) {
	digest, _, err := List(ctx, cfg)
	return digest, err
}

// List is Pin that also returns what the digest covers, in canonical JSON
// (see Digest): what a person reviews before pinning.
func List(ctx context.Context, cfg *Config) (digest string, tools json.RawMessage, err error) {
	s, err := newServer(cfg)
	if err != nil {
		return "", nil, err
	}
	cs, err := s.connect(ctx)
	if err != nil {
		return "", nil, err
	}
	defer cs.Close()
	list, err := s.list(ctx, cs)
	if err != nil {
		return "", nil, err
	}
	digest, canon, err := Digest(list)
	if err != nil {
		return "", nil, agent.NewPeerError(s.peer, 0, false, "unusable tool list: "+err.Error(), err)
	}
	return digest, canon, nil
}

// Digest returns the pin of a tool list ("sha256:<hex>"), and the list in
// the canonical form it hashes: tools sorted by name, each with its name,
// title, description, input schema, output schema and annotations, as JSON
// with sorted keys and no insignificant space. Two tools with one name are
// an error.
func Digest(tools []*mcp.Tool) (string, []byte, error) {
	defs, err := defsOf(tools)
	if err != nil {
		return "", nil, err
	}
	canon, err := canonical(defs)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(append([]byte(pinDomain), canon...))
	return "sha256:" + hex.EncodeToString(sum[:]), canon, nil
}

// defsOf turns a tool list into its pinned form, sorted by name.
func defsOf(tools []*mcp.Tool) ([]toolDef, error) {
	defs := make([]toolDef, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool list entry %d is empty", i)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("tool list entry %d has no name", i)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("the server lists tool %q twice", t.Name)
		}
		seen[t.Name] = true
		d := toolDef{Name: t.Name, Title: t.Title, Description: t.Description}
		var err error
		if d.InputSchema, err = canonicalOrNil(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
		if d.OutputSchema, err = canonicalOrNil(t.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
		if t.Annotations != nil {
			if d.Annotations, err = canonical(t.Annotations); err != nil {
				return nil, fmt.Errorf("tool %q: annotations: %w", t.Name, err)
			}
		}
		defs = append(defs, d)
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs, nil
}

func canonicalOrNil(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	c, err := canonical(v)
	if err != nil || string(c) == "null" {
		return nil, err
	}
	return c, nil
}

// canonical renders v as JSON with object keys sorted, numbers as the
// shortest form that round-trips, no HTML escaping and no space.
func canonical(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil { // maps encode with sorted keys
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// changes says what differs between the pinned definitions and the
// server's current ones.
func changes(pinned, now []toolDef) []string {
	old := make(map[string]toolDef, len(pinned))
	for _, d := range pinned {
		old[d.Name] = d
	}
	var out []string
	for _, d := range now {
		p, ok := old[d.Name]
		if !ok {
			out = append(out, fmt.Sprintf("tool %q added", d.Name))
			continue
		}
		delete(old, d.Name)
		var fields []string
		if p.Title != d.Title {
			fields = append(fields, "title")
		}
		if p.Description != d.Description {
			fields = append(fields, "description")
		}
		if !bytes.Equal(p.InputSchema, d.InputSchema) {
			fields = append(fields, "input schema")
		}
		if !bytes.Equal(p.OutputSchema, d.OutputSchema) {
			fields = append(fields, "output schema")
		}
		if !bytes.Equal(p.Annotations, d.Annotations) {
			fields = append(fields, "annotations")
		}
		for _, f := range fields {
			out = append(out, fmt.Sprintf("tool %q: %s", d.Name, f))
		}
	}
	for _, name := range sortedKeys(old) {
		out = append(out, fmt.Sprintf("tool %q removed", name))
	}
	return out
}
