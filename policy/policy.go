// Package policy decides who may do what: principals, actions and a policy
// that grants actions to principals through roles. Everything not granted is
// denied.
//
// A Policy comes only from Load or LoadFile (an operator-supplied document
// at an explicit path), Default or DenyAll, and it cannot change once made:
// it has no setters and keeps its own copy of everything it was built from.
// There is deliberately no API by which a node, a tool, a model or a remote
// caller adds a principal, changes a role or widens a grant; changing a
// policy means an operator loading a new one. This package must never grant
// anything on an error, an unknown name, a nil or an empty policy, and must
// never load a policy from a place it was not explicitly pointed at.
package policy

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
)

// Principal kinds: how a caller was identified.
const (
	KindLocal     = "local"     // the user running the CLI, identified by the OS
	KindToken     = "token"     // a caller presenting a bearer token to the server
	KindMCP       = "mcp"       // an MCP client
	KindA2A       = "a2a"       // a remote A2A agent
	KindAnonymous = "anonymous" // nobody in particular
)

func validKind(k string) bool {
	switch k {
	case KindLocal, KindToken, KindMCP, KindA2A, KindAnonymous:
		return true
	}
	return false
}

// Principal is who is asking.
type Principal struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Chain lists the callers on whose behalf this one acts, outermost
	// (the original requester) first. A delegated request is allowed only
	// if the principal and every member of the chain are allowed.
	Chain []string `json:"chain,omitempty"`
}

// String renders the principal for logs and errors: kind:id, and the
// delegation chain if there is one. Control characters are quoted.
func (p Principal) String() string {
	var b strings.Builder
	b.WriteString(safe(p.Kind))
	b.WriteByte(':')
	b.WriteString(safe(p.ID))
	if len(p.Chain) > 0 {
		b.WriteString(" (for ")
		for i, c := range p.Chain {
			if i > 0 {
				b.WriteString(" > ")
			}
			b.WriteString(safe(c))
		}
		b.WriteByte(')')
	}
	return b.String()
}

func safe(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Action is something a principal may be allowed to do.
type Action string

// The actions. Graph-scoped actions take the graph's name as their resource
// (for run.read, run.cancel and approval.decide, the graph of the run); the
// others take no resource.
const (
	ActionGraphRun       Action = "graph.run"       // start a run of a graph
	ActionRunRead        Action = "run.read"        // read a run, its events and output
	ActionRunCancel      Action = "run.cancel"      // cancel a run
	ActionApprovalDecide Action = "approval.decide" // approve or deny a held call
	ActionKill           Action = "kill"            // the kill switch: stop every run
	ActionAuditRead      Action = "audit.read"      // read and export the audit log
	ActionAdmin          Action = "admin"           // administer the server
)

// Actions lists every action.
func Actions() []Action {
	return []Action{ActionGraphRun, ActionRunRead, ActionRunCancel, ActionApprovalDecide,
		ActionKill, ActionAuditRead, ActionAdmin}
}

// Valid reports whether a is one of the actions.
func (a Action) Valid() bool {
	switch a {
	case ActionGraphRun, ActionRunRead, ActionRunCancel, ActionApprovalDecide,
		ActionKill, ActionAuditRead, ActionAdmin:
		return true
	}
	return false
}

// GraphScoped reports whether a's resource is a graph name.
func (a Action) GraphScoped() bool {
	switch a {
	case ActionGraphRun, ActionRunRead, ActionRunCancel, ActionApprovalDecide:
		return true
	}
	return false
}

// Deny reasons, the Reason of a *DeniedError.
const (
	ReasonNoPolicy         = "no policy loaded"
	ReasonUnknownAction    = "unknown action"
	ReasonBadPrincipal     = "malformed principal"
	ReasonAnonymous        = "anonymous callers are not granted anything"
	ReasonUnknownPrincipal = "principal not in policy"
	ReasonKindMismatch     = "principal kind does not match the policy entry"
	ReasonNoResource       = "action needs a graph name"
	ReasonNotGranted       = "not granted"
	ReasonDelegator        = "a principal in the delegation chain is not allowed"
	ReasonNotOwner         = "run belongs to another principal"
	ReasonNotHuman         = "approvals must come from a local or token principal"
	ReasonDelegatedApprove = "a delegated principal cannot approve"
	ReasonSelfApproval     = "the principal that started an untrusted run cannot approve its calls"
)

// DeniedError says that a principal may not do something, and why.
type DeniedError struct {
	Principal Principal
	Action    Action
	Resource  string
	Reason    string // one of the Reason constants
	Detail    string // more about the reason, e.g. which chain member; may be empty
}

func (e *DeniedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "denied: %s may not %s", e.Principal, safe(string(e.Action)))
	if e.Resource != "" {
		fmt.Fprintf(&b, " on %q", e.Resource)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteByte(')')
	}
	return b.String()
}

// Policy maps principals to the actions they may take. The zero value and a
// nil *Policy deny everything. A Policy is immutable and safe for concurrent
// use.
type Policy struct {
	loaded     bool
	principals map[string]entry
}

// entry is what the policy says about one principal ID.
type entry struct {
	kind   string // "" matches any kind but anonymous
	grants []grant
}

// grant is one allow rule, flattened from a role.
type grant struct {
	role        string
	action      Action   // or "*"
	graphs      []string // nil: any graph, and the action need not be graph-scoped
	allRuns     bool
	selfApprove bool
}

func (g grant) matches(a Action, resource string) bool {
	if g.action != "*" && g.action != a {
		return false
	}
	if g.graphs == nil {
		return true
	}
	if !a.GraphScoped() {
		return false
	}
	for _, pat := range g.graphs {
		if ok, err := path.Match(pat, resource); ok && err == nil {
			return true
		}
	}
	return false
}

// DenyAll returns a policy that denies everything to everyone.
func DenyAll() *Policy { return &Policy{loaded: true, principals: map[string]entry{}} }

// Default returns the zero-configuration policy: the local CLI user (a
// principal of kind local named localUser) may do everything, including
// approving calls of runs it started itself (it is the only human there
// is), and nobody else may do anything. An empty or malformed localUser
// gives DenyAll.
func Default(localUser string) *Policy {
	if checkID(localUser) != nil {
		return DenyAll()
	}
	return &Policy{loaded: true, principals: map[string]entry{
		localUser: {kind: KindLocal, grants: []grant{{role: "operator", action: "*", allRuns: true, selfApprove: true}}},
	}}
}

// Authorize returns nil if p may take action on resource (a graph name for
// graph-scoped actions, ignored otherwise), and a *DeniedError otherwise.
func (pol *Policy) Authorize(p Principal, action Action, resource string) error {
	_, err := pol.decide(p, action, resource)
	return err
}

// AuthorizeRun is Authorize for an action on an existing run of graph,
// started by owner. Reading or cancelling a run that another principal
// started needs a grant with all_runs; a principal reaches its own runs with
// the plain grant.
func (pol *Policy) AuthorizeRun(p Principal, action Action, graph string, owner Principal) error {
	gs, err := pol.decide(p, action, graph)
	if err != nil {
		return err
	}
	if action != ActionRunRead && action != ActionRunCancel {
		return nil
	}
	if p.ID == owner.ID && p.Kind == owner.Kind {
		return nil
	}
	for _, g := range gs {
		if g.allRuns {
			return nil
		}
	}
	return deny(p, action, graph, ReasonNotOwner, "started by "+owner.String())
}

// CanApprove returns nil if p may decide a held call in a run of graph that
// runStartedBy started; runUntrusted says whether the run holds untrusted
// data. The approver needs approval.decide on the graph, must be a human
// principal (local or token) acting for nobody else, and, when the run is
// untrusted, must not be the principal that started it (nor one it acts for)
// unless a role granting the approval sets self_approve.
func (pol *Policy) CanApprove(p Principal, graph string, runStartedBy Principal, runUntrusted bool) error {
	gs, err := pol.decide(p, ActionApprovalDecide, graph)
	if err != nil {
		return err
	}
	if p.Kind != KindLocal && p.Kind != KindToken {
		return deny(p, ActionApprovalDecide, graph, ReasonNotHuman, "")
	}
	if len(p.Chain) > 0 {
		return deny(p, ActionApprovalDecide, graph, ReasonDelegatedApprove, "")
	}
	if !runUntrusted || !sameParty(p, runStartedBy) {
		return nil
	}
	for _, g := range gs {
		if g.selfApprove {
			return nil
		}
	}
	return deny(p, ActionApprovalDecide, graph, ReasonSelfApproval, "no role granting it sets self_approve")
}

// sameParty reports whether approver is, or stands behind, the starter.
func sameParty(approver, starter Principal) bool {
	if approver.ID == starter.ID {
		return true
	}
	for _, c := range starter.Chain {
		if c == approver.ID {
			return true
		}
	}
	return false
}

// decide is the one decision procedure. It returns the principal's grants
// that match, for callers that look at their flags.
func (pol *Policy) decide(p Principal, action Action, resource string) ([]grant, error) {
	if pol == nil || !pol.loaded {
		return nil, deny(p, action, resource, ReasonNoPolicy, "")
	}
	if !action.Valid() {
		return nil, deny(p, action, resource, ReasonUnknownAction, "")
	}
	if !validKind(p.Kind) || checkID(p.ID) != nil {
		return nil, deny(p, action, resource, ReasonBadPrincipal, "")
	}
	if action.GraphScoped() && resource == "" {
		return nil, deny(p, action, resource, ReasonNoResource, "")
	}
	e, ok := pol.principals[p.ID]
	switch {
	case !ok && p.Kind == KindAnonymous:
		return nil, deny(p, action, resource, ReasonAnonymous, "")
	case !ok:
		return nil, deny(p, action, resource, ReasonUnknownPrincipal, "")
	case e.kind == "" && p.Kind == KindAnonymous:
		return nil, deny(p, action, resource, ReasonAnonymous, "")
	case e.kind != "" && e.kind != p.Kind:
		return nil, deny(p, action, resource, ReasonKindMismatch, "entry is for kind "+e.kind)
	}
	gs := e.matching(action, resource)
	if len(gs) == 0 {
		return nil, deny(p, action, resource, ReasonNotGranted, "")
	}
	for _, id := range p.Chain {
		ce, ok := pol.principals[id]
		if !ok || checkID(id) != nil || len(ce.matching(action, resource)) == 0 {
			return nil, deny(p, action, resource, ReasonDelegator, safe(id))
		}
	}
	return gs, nil
}

func (e entry) matching(a Action, resource string) []grant {
	var out []grant
	for _, g := range e.grants {
		if g.matches(a, resource) {
			out = append(out, g)
		}
	}
	return out
}

func deny(p Principal, a Action, resource, reason, detail string) error {
	return &DeniedError{Principal: p, Action: a, Resource: resource, Reason: reason, Detail: detail}
}

// checkID accepts a principal ID or role name: printable, no spaces, at
// most 256 bytes.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty name")
	case len(id) > 256:
		return fmt.Errorf("name longer than 256 bytes")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("name %q holds a space or control character", id)
		}
	}
	return nil
}
