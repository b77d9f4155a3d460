package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/babelagent/babel/agent"
)

// Ref is a parsed agent reference from a topology.
type Ref struct {
	// Kind selects the factory: "builtin", "http", "openai", "mcp+stdio", "https", ...
	Kind string
	// Target is the rest of a short form ("trim" in "builtin:trim",
	// the URL in "https://...", the model in "openai:MODEL").
	Target string
	// Config is the map form's configuration merged with the node's `with`.
	Config map[string]any
	// Node is the node being built (its declarations: egress, secrets, ...).
	Node *NodeSpec
}

// Factory builds the agent a node refers to.
type Factory func(ref Ref) (agent.Agent, error)

// Registry maps agent kinds to factories. It is filled at start-up and read
// only afterwards.
type Registry struct {
	kinds map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{kinds: map[string]Factory{}} }

// Register adds a factory for kind, replacing any earlier one.
func (r *Registry) Register(kind string, f Factory) { r.kinds[kind] = f }

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.kinds))
	for k := range r.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseRef turns a node's agent field into a Ref.
func ParseRef(n *NodeSpec) (Ref, error) {
	ref := Ref{Node: n, Config: map[string]any{}}
	switch a := n.Agent.(type) {
	case nil:
		return ref, fmt.Errorf("no agent given")
	case string:
		kind, target, ok := strings.Cut(a, ":")
		if !ok || kind == "" {
			return ref, fmt.Errorf("agent %q: want kind:target (for example builtin:trim)", a)
		}
		ref.Kind, ref.Target = kind, target
	case map[string]any:
		if len(a) != 1 {
			return ref, fmt.Errorf("agent map must have exactly one key, the kind (for example {http: {url: ...}})")
		}
		for k, v := range a {
			ref.Kind = k
			switch c := v.(type) {
			case map[string]any:
				for ck, cv := range c {
					ref.Config[ck] = cv
				}
			case string:
				ref.Target = c
			case nil:
			default:
				return ref, fmt.Errorf("agent %s: configuration must be a map or a string", k)
			}
		}
	default:
		return ref, fmt.Errorf("agent must be a string or a one-key map, not %T", a)
	}
	for k, v := range n.With {
		ref.Config[k] = v
	}
	return ref, nil
}

func (r *Registry) build(ref Ref) (agent.Agent, error) {
	f, ok := r.kinds[ref.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown agent kind %q (known: %s)", ref.Kind, strings.Join(r.Kinds(), ", "))
	}
	a, err := f(ref)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ref.Kind, err)
	}
	return a, nil
}
