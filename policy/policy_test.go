package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const doc = `
principals:
  alice:  {roles: [operator]}
  ci-bot: {roles: [runner], kind: token}
  carol:  {roles: [approver], kind: token}
  dave:   {roles: [approver, self], kind: token}
  peer:   {roles: [runner], kind: a2a}
  idle:   {}
  guest:  {roles: [reader], kind: anonymous}
roles:
  runner:   {allow: [{action: graph.run, graphs: ["triage", "report-*"]}, {action: run.read}]}
  operator: {allow: [{action: "*", all_runs: true}]}
  approver: {allow: [{action: approval.decide, graphs: ["*"]}]}
  self:     {allow: [{action: approval.decide, graphs: ["triage"]}], self_approve: true}
  reader:   {allow: [{action: run.read, graphs: [public]}]}
`

func mustLoad(t *testing.T, s string) *Policy {
	t.Helper()
	p, err := Load([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	alice = Principal{ID: "alice", Kind: KindToken}
	ciBot = Principal{ID: "ci-bot", Kind: KindToken}
	carol = Principal{ID: "carol", Kind: KindToken}
	dave  = Principal{ID: "dave", Kind: KindToken}
	peer  = Principal{ID: "peer", Kind: KindA2A}
	guest = Principal{ID: "guest", Kind: KindAnonymous}
)

func TestAuthorize(t *testing.T) {
	pol := mustLoad(t, doc)
	tests := []struct {
		name     string
		pol      *Policy
		p        Principal
		action   Action
		resource string
		reason   string // "" means allowed
	}{
		{"operator does anything", pol, alice, ActionAdmin, "", ""},
		{"operator runs any graph", pol, alice, ActionGraphRun, "anything", ""},
		{"runner runs an exact graph", pol, ciBot, ActionGraphRun, "triage", ""},
		{"runner runs a globbed graph", pol, ciBot, ActionGraphRun, "report-weekly", ""},
		{"glob does not cross its pattern", pol, ciBot, ActionGraphRun, "reports-weekly", ReasonNotGranted},
		{"glob is anchored", pol, ciBot, ActionGraphRun, "triage-2", ReasonNotGranted},
		{"runner reads any run", pol, ciBot, ActionRunRead, "whatever", ""},
		{"runner may not cancel", pol, ciBot, ActionRunCancel, "triage", ReasonNotGranted},
		{"runner may not kill", pol, ciBot, ActionKill, "", ReasonNotGranted},
		{"graph grant does not cover graphless actions", pol, carol, ActionAdmin, "", ReasonNotGranted},
		{"approver decides anywhere", pol, carol, ActionApprovalDecide, "triage", ""},
		{"no policy", nil, alice, ActionRunRead, "x", ReasonNoPolicy},
		{"zero policy", &Policy{}, alice, ActionRunRead, "x", ReasonNoPolicy},
		{"unknown action", pol, alice, Action("graph.delete"), "x", ReasonUnknownAction},
		{"wildcard is not an action", pol, alice, Action("*"), "x", ReasonUnknownAction},
		{"empty id", pol, Principal{Kind: KindToken}, ActionRunRead, "x", ReasonBadPrincipal},
		{"unknown kind", pol, Principal{ID: "alice", Kind: "root"}, ActionRunRead, "x", ReasonBadPrincipal},
		{"control character in id", pol, Principal{ID: "ali\nce", Kind: KindToken}, ActionRunRead, "x", ReasonBadPrincipal},
		{"graph action without a graph", pol, alice, ActionGraphRun, "", ReasonNoResource},
		{"unknown principal", pol, Principal{ID: "mallory", Kind: KindToken}, ActionRunRead, "x", ReasonUnknownPrincipal},
		{"unknown anonymous", pol, Principal{ID: "x", Kind: KindAnonymous}, ActionRunRead, "x", ReasonAnonymous},
		{"anonymous may not borrow a kindless entry", pol, Principal{ID: "alice", Kind: KindAnonymous}, ActionRunRead, "x", ReasonAnonymous},
		{"anonymous entry named explicitly", pol, guest, ActionRunRead, "public", ""},
		{"kind pinned", pol, Principal{ID: "ci-bot", Kind: KindA2A}, ActionGraphRun, "triage", ReasonKindMismatch},
		{"principal with no roles", pol, Principal{ID: "idle", Kind: KindLocal}, ActionRunRead, "x", ReasonNotGranted},
		{"delegation intersects: both allowed", pol, Principal{ID: "peer", Kind: KindA2A, Chain: []string{"ci-bot"}}, ActionGraphRun, "triage", ""},
		{"delegation intersects: delegator lacks it", pol, Principal{ID: "alice", Kind: KindToken, Chain: []string{"ci-bot"}}, ActionKill, "", ReasonDelegator},
		{"delegation from an unknown caller", pol, Principal{ID: "peer", Kind: KindA2A, Chain: []string{"mallory"}}, ActionGraphRun, "triage", ReasonDelegator},
		{"deny all", DenyAll(), alice, ActionRunRead, "x", ReasonUnknownPrincipal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.pol.Authorize(tt.p, tt.action, tt.resource)
			checkDecision(t, err, tt.reason)
			if err != nil {
				var de *DeniedError
				errors.As(err, &de)
				if de.Principal.ID != tt.p.ID || de.Action != tt.action || de.Resource != tt.resource {
					t.Fatalf("DeniedError does not describe the request: %+v", de)
				}
			}
		})
	}
}

func checkDecision(t *testing.T, err error, reason string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Fatalf("denied: %v", err)
		}
		return
	}
	var de *DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want *DeniedError (%s)", err, reason)
	}
	if de.Reason != reason {
		t.Fatalf("reason %q, want %q (%v)", de.Reason, reason, err)
	}
	if !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), reason) {
		t.Fatalf("message does not say why: %v", err)
	}
}

func TestDenyAllDeniesEverything(t *testing.T) {
	pol := DenyAll()
	for _, kind := range []string{KindLocal, KindToken, KindMCP, KindA2A, KindAnonymous} {
		for _, a := range Actions() {
			p := Principal{ID: "anyone", Kind: kind}
			if err := pol.Authorize(p, a, "g"); err == nil {
				t.Errorf("DenyAll allowed %v to %s", p, a)
			}
			if err := pol.AuthorizeRun(p, a, "g", p); err == nil {
				t.Errorf("DenyAll allowed %v to %s its own run", p, a)
			}
		}
		if err := pol.CanApprove(Principal{ID: "anyone", Kind: kind}, "g", Principal{}, false); err == nil {
			t.Errorf("DenyAll let %s approve", kind)
		}
	}
}

func TestDefaultTrustsOnlyTheLocalUser(t *testing.T) {
	pol := Default("alice")
	me := Principal{ID: "alice", Kind: KindLocal}
	for _, a := range Actions() {
		if err := pol.Authorize(me, a, "g"); err != nil {
			t.Errorf("local user denied %s: %v", a, err)
		}
	}
	if err := pol.CanApprove(me, "g", me, true); err != nil {
		t.Errorf("the only human cannot approve its own untrusted run: %v", err)
	}
	for _, p := range []Principal{
		{ID: "alice", Kind: KindToken}, {ID: "alice", Kind: KindMCP}, {ID: "alice", Kind: KindA2A},
		{ID: "alice", Kind: KindAnonymous}, {ID: "bob", Kind: KindLocal},
	} {
		if err := pol.Authorize(p, ActionRunRead, "g"); err == nil {
			t.Errorf("default policy allowed %v", p)
		}
	}
	for _, bad := range []string{"", "two words", "tab\t"} {
		if err := Default(bad).Authorize(Principal{ID: bad, Kind: KindLocal}, ActionRunRead, "g"); err == nil {
			t.Errorf("Default(%q) allowed something", bad)
		}
	}
}

func TestAuthorizeRunKeepsCallersToTheirOwnRuns(t *testing.T) {
	pol := mustLoad(t, doc)
	other := Principal{ID: "someone", Kind: KindToken}
	checkDecision(t, pol.AuthorizeRun(ciBot, ActionRunRead, "triage", ciBot), "")
	checkDecision(t, pol.AuthorizeRun(ciBot, ActionRunRead, "triage", other), ReasonNotOwner)
	checkDecision(t, pol.AuthorizeRun(ciBot, ActionRunRead, "triage", Principal{ID: "ci-bot", Kind: KindA2A}), ReasonNotOwner)
	checkDecision(t, pol.AuthorizeRun(alice, ActionRunCancel, "triage", other), "")
	checkDecision(t, pol.AuthorizeRun(ciBot, ActionRunCancel, "triage", ciBot), ReasonNotGranted)
}

func TestCanApprove(t *testing.T) {
	pol := mustLoad(t, doc)
	tests := []struct {
		name      string
		p         Principal
		graph     string
		starter   Principal
		untrusted bool
		reason    string
	}{
		{"approver on another's untrusted run", carol, "triage", ciBot, true, ""},
		{"approver on its own trusted run", carol, "triage", carol, false, ""},
		{"approver on its own untrusted run", carol, "triage", carol, true, ReasonSelfApproval},
		{"approver behind the starter", carol, "triage", Principal{ID: "peer", Kind: KindA2A, Chain: []string{"carol"}}, true, ReasonSelfApproval},
		{"self_approve role", dave, "triage", dave, true, ""},
		{"self_approve only where its role grants", dave, "report", dave, true, ReasonSelfApproval},
		{"runner cannot approve", ciBot, "triage", alice, false, ReasonNotGranted},
		{"agent cannot approve", Principal{ID: "peer", Kind: KindA2A}, "triage", alice, false, ReasonNotGranted},
		{"delegated approver", Principal{ID: "carol", Kind: KindToken, Chain: []string{"carol"}}, "triage", alice, false, ReasonDelegatedApprove},
		{"no graph", carol, "", alice, false, ReasonNoResource},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkDecision(t, pol.CanApprove(tt.p, tt.graph, tt.starter, tt.untrusted), tt.reason)
		})
	}
	// Machine principals cannot approve even when a policy grants it.
	mcp := mustLoad(t, "principals: {tool: {roles: [a], kind: mcp}}\nroles: {a: {allow: [{action: approval.decide}]}}")
	checkDecision(t, mcp.CanApprove(Principal{ID: "tool", Kind: KindMCP}, "g", alice, false), ReasonNotHuman)
	checkDecision(t, (*Policy)(nil).CanApprove(alice, "g", ciBot, false), ReasonNoPolicy)
}

func TestLoadErrorsNameTheProblem(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown top-level key", "principal: {}\n", `line 1, column 1: unknown field "principal"`},
		{"unknown nested key", "principals:\n  alice: {roles: [x], colour: red}\n", `line 2, column 23: unknown field "colour"`},
		{"unknown grant key json", `{"roles": {"a": {"allow": [{"action": "kill", "graph": ["x"]}]}}}`, `unknown field "graph"`},
		{"bad action", "roles:\n  r:\n    allow:\n      - action: graph.runn\n",
			`line 4, column 17: roles.r.allow[0].action: unknown action "graph.runn"`},
		{"missing action", "roles: {r: {allow: [{graphs: [x]}]}}", "roles.r.allow[0]: missing action"},
		{"empty graphs", "roles: {r: {allow: [{action: graph.run, graphs: []}]}}", "roles.r.allow[0].graphs: graphs is empty"},
		{"graphs on graphless action", "roles: {r: {allow: [{action: admin, graphs: [x]}]}}", "graphs does not apply to action admin"},
		{"bad pattern", "roles: {r: {allow: [{action: graph.run, graphs: [\"[\"]}]}}", `roles.r.allow[0].graphs[0]: bad graph pattern "["`},
		{"all_runs misplaced", "roles: {r: {allow: [{action: graph.run, all_runs: true}]}}", "all_runs does not apply"},
		{"unknown role", "principals:\n  bob: {roles: [nope]}\n", `line 2, column 17: principals.bob.roles[0]: unknown role "nope"`},
		{"unknown kind", "principals: {bob: {kind: robot}}", `principals.bob.kind: unknown kind "robot"`},
		{"bad principal id", "principals: {\"two words\": {}}", "bad principal id"},
		{"wrong type", "principals: [alice]", "line 1"},
		{"duplicate key", "roles: {}\nroles: {}\n", `line 2, column 1: mapping key "roles" already defined`},
		{"anchors", "roles: {a: &g {allow: []}, b: *g}", "anchors and aliases are not allowed"},
		{"bad version", "version: 2", "version: unsupported version 2"},
		{"two documents", "roles: {}\n---\nroles: {}\n", "want exactly one document"},
		{"empty", "  \n", "document is empty"},
		{"comment only", "# nothing\n", "document is empty"},
		{"syntax", "roles: {a: [}", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol, err := Load([]byte(tt.doc))
			var le *LoadError
			if pol != nil || !errors.As(err, &le) {
				t.Fatalf("Load = %v, %v; want a *LoadError", pol, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadAcceptsJSON(t *testing.T) {
	pol := mustLoad(t, `{"version": 1, "principals": {"ci-bot": {"roles": ["runner"]}},
		"roles": {"runner": {"allow": [{"action": "graph.run", "graphs": ["triage"]}]}}}`)
	checkDecision(t, pol.Authorize(ciBot, ActionGraphRun, "triage"), "")
	checkDecision(t, pol.Authorize(ciBot, ActionGraphRun, "other"), ReasonNotGranted)
}

func TestPolicyIsACopy(t *testing.T) {
	data := []byte("principals: {ci-bot: {roles: [r]}}\nroles: {r: {allow: [{action: graph.run, graphs: [triage]}]}}")
	pol := mustLoad(t, string(data))
	copy(data, strings.Repeat(" ", len(data)))
	checkDecision(t, pol.Authorize(ciBot, ActionGraphRun, "triage"), "")
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(good, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	checkDecision(t, pol.Authorize(ciBot, ActionGraphRun, "triage"), "")

	loose := filepath.Join(dir, "loose.yaml")
	if err := os.WriteFile(loose, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(loose); err == nil || !strings.Contains(err.Error(), loose) || !strings.Contains(err.Error(), "0666") {
		t.Fatalf("world-writable policy: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("roles: {r: {allow: [{action: nope}]}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad policy file: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file loaded")
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(dir, "foreign.yaml")
		if err := os.WriteFile(foreign, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err == nil {
			if _, err := LoadFile(foreign); err == nil || !strings.Contains(err.Error(), "uid 65534") {
				t.Fatalf("foreign-owned policy: %v", err)
			}
		}
	}
}

func TestPrincipalString(t *testing.T) {
	for p, want := range map[*Principal]string{
		{ID: "alice", Kind: KindLocal}:                            "local:alice",
		{ID: "agent", Kind: KindA2A, Chain: []string{"bob", "c"}}: "a2a:agent (for bob > c)",
		{ID: "evil\nINFO fake", Kind: KindToken}:                  `token:"evil\nINFO fake"`,
		{}:                                                        `"":""`,
	} {
		if got := p.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// FuzzLoad: no document makes Load panic, and whatever loads denies an
// unknown principal.
func FuzzLoad(f *testing.F) {
	f.Add(doc)
	f.Add(`{"roles": {"a": {"allow": [{"action": "*"}]}}}`)
	f.Add("roles: {a: &x {}, b: *x}")
	f.Fuzz(func(t *testing.T, s string) {
		pol, err := Load([]byte(s))
		if err != nil {
			return
		}
		if pol.Authorize(Principal{ID: "\x00nobody", Kind: KindToken}, ActionAdmin, "") == nil {
			t.Fatal("unknown principal allowed")
		}
	})
}
