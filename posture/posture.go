// Package posture reports the defense-in-depth posture of a live
// configuration, criterion by criterion (BoundBench C1–C10): which
// controls are on, with the evidence read from the running engine, and
// which gaps remain. It only reads; it never changes a setting.
package posture

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/run"
)

// Control is one control and whether it is in force.
type Control struct {
	Name     string `json:"name"`
	On       bool   `json:"on"`
	Evidence string `json:"evidence"`
}

// Criterion is one BoundBench criterion.
type Criterion struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Controls []Control `json:"controls"`
	Gaps     []string  `json:"gaps,omitempty"`
}

// On reports whether every control of the criterion is in force.
func (c Criterion) On() bool {
	for _, k := range c.Controls {
		if !k.On {
			return false
		}
	}
	return true
}

// Report is the whole scorecard.
type Report struct {
	Criteria []Criterion `json:"criteria"`
}

func fileMode(path string) (os.FileMode, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return fi.Mode().Perm(), true
}

// Assess reads the engine's configuration and state.
func Assess(ctx context.Context, e *engine.Engine) Report {
	cfg := e.Config
	auditOn := !cfg.UnsafeDisableAudit
	r2On := !cfg.UnsafeDisableRuleOfTwo
	var verify Control
	if pub, err := audit.LoadPublicKey(audit.PublicKeyFile(cfg.AuditKey)); err != nil {
		verify = Control{Name: "audit log verifies", On: false, Evidence: err.Error()}
	} else if rep, err := audit.Verify(ctx, e.AuditPath(), pub); err != nil {
		verify = Control{Name: "audit log verifies", On: false, Evidence: err.Error()}
	} else {
		verify = Control{Name: "audit log verifies", On: true, Evidence: fmt.Sprintf("%d records, %d signatures, chain and signatures intact", rep.Records, rep.Signatures)}
	}
	keyMode, keyOK := fileMode(cfg.AuditKey)
	storeMode, _ := fileMode(filepath.Join(cfg.DataDir, "babel.db"))
	_, bwrapErr := exec.LookPath("bwrap")
	killed, _ := e.Store.Killed(ctx)
	policy := "default: only the local user, nobody else"
	if cfg.PolicyFile != "" {
		policy = "policy file " + cfg.PolicyFile
	}
	lim := run.DefaultLimits
	on := func(b bool, yes, no string) Control {
		return Control{On: b, Evidence: map[bool]string{true: yes, false: no}[b]}
	}
	named := func(n string, c Control) Control { c.Name = n; return c }

	return Report{Criteria: []Criterion{
		{ID: "C1", Title: "Identity & least privilege", Controls: []Control{
			{Name: "deny-by-default authorization on every call", On: true, Evidence: policy},
			{Name: "a node sees only the secrets it declares", On: true, Evidence: "secrets broker scopes each call; the environment is read only for declared names"},
			{Name: "no caller token forwarded downstream", On: true, Evidence: "adapters build their own requests; inbound headers never reach them"},
		}, Gaps: []string{"per-call minted, short-lived credentials are not brokered yet"}},
		{ID: "C2", Title: "Approval gates", Controls: []Control{
			named("approvals persisted (survive a restart)", on(true, "SQLite store "+filepath.Join(cfg.DataDir, "babel.db"), "")),
			{Name: "approval bound to the exact call (digest), single use", On: true, Evidence: "sha256 over node, agent, destination and canonical arguments"},
			{Name: "the untrusted caller of a run cannot approve it", On: true, Evidence: "separation of duties in engine.Decide"},
			{Name: "approval requests capped per run", On: true, Evidence: "10 per run"},
		}},
		{ID: "C3", Title: "Tool & action scoping", Controls: []Control{
			{Name: "arguments validated centrally against each node's JSON Schema", On: true, Evidence: "kernel.Invoke, before any call"},
			{Name: "declared effects enforced", On: true, Evidence: "an agent effect the node does not declare is refused"},
			{Name: "egress guard: per-node allowlist, SSRF checks on the dialed address, no redirects", On: true, Evidence: "package egress"},
		}},
		{ID: "C4", Title: "Code-execution isolation", Controls: []Control{
			named("OS sandbox available (bubblewrap)", on(bwrapErr == nil, "bwrap found: namespaces, no network, seccomp, rlimits", "bwrap not found: process and Python nodes fail closed")),
			{Name: "WebAssembly sandbox", On: true, Evidence: "wazero: no filesystem, no env, no sockets, memory cap"},
			{Name: "no fallback to the host", On: true, Evidence: "a sandbox that cannot start fails the node"},
		}},
		{ID: "C5", Title: "Untrusted input blast radius", Controls: []Control{
			{Name: "provenance labels on every message", On: true, Evidence: "untrusted and sensitive labels propagate through every node"},
			named("Rule of Two enforced", on(r2On, "consequential calls in a run holding untrusted and sensitive data wait for approval", "DISABLED by operator flag unsafe_disable_rule_of_two")),
		}},
		{ID: "C6", Title: "Memory, context & configuration integrity", Controls: []Control{
			{Name: "nothing loaded from the working directory", On: true, Evidence: "configuration only from --config or the XDG directories"},
			named("store private to its owner", on(storeMode&0o077 == 0, fmt.Sprintf("mode %v", storeMode), fmt.Sprintf("mode %v is readable by others", storeMode))),
		}},
		{ID: "C7", Title: "Third-party extensions", Controls: []Control{
			{Name: "MCP tool lists pinned by digest; a changed server is refused", On: true, Evidence: "adapter/mcp pin"},
			{Name: "OpenAPI documents can be pinned by digest and are never executed", On: true, Evidence: "adapter/openapi"},
			{Name: "nothing installed on a model's say-so", On: true, Evidence: "no tool installs packages"},
		}},
		{ID: "C8", Title: "Secrets & sensitive-data protection", Controls: []Control{
			{Name: "secret values redacted from outputs, traces, logs, errors and audit records", On: true, Evidence: "registered values and credential patterns"},
			{Name: "a literal credential in a topology is a load error", On: true, Evidence: "graph.Compile"},
			named("audit key outside the data directory, private", on(keyOK && keyMode&0o077 == 0, fmt.Sprintf("%s mode %v", cfg.AuditKey, keyMode), "audit key missing or readable by others")),
		}},
		{ID: "C9", Title: "Audit & traceability", Controls: []Control{
			named("audit on, write-ahead, fail closed", on(auditOn, "intent record durable before each action; no record, no action", "DISABLED by operator flag unsafe_disable_audit (recorded)")),
			{Name: "hash chain signed with ed25519", On: auditOn, Evidence: "babel audit verify"},
			verify,
			named("OpenTelemetry export", on(cfg.OTLPEndpoint != "", "content-free spans to "+cfg.OTLPEndpoint, "not configured (spans are content-free when on)")),
		}},
		{ID: "C10", Title: "Limits & kill switch", Controls: []Control{
			{Name: "non-zero defaults for every run", On: true, Evidence: fmt.Sprintf("deadline %v, %d steps, %d tokens, $%g of model spend (price table), %d MiB of egress; per-node timeout 30s", lim.Deadline, lim.MaxSteps, lim.MaxTokens, lim.MaxCostUSD, lim.MaxEgressBytes>>20)},
			{Name: "hard ceilings (configuration above them fails to start)", On: true, Evidence: fmt.Sprintf("deadline %v, %d steps, %d tokens", run.Ceilings.Deadline, run.Ceilings.MaxSteps, run.Ceilings.MaxTokens)},
			{Name: "repeated-call breaker and consequential rate limit", On: true, Evidence: "5 repeats; 120 consequential calls per minute per run"},
			named("kill switch", on(!killed, "released (babel kill --all engages it)", "ENGAGED: no run may start")),
		}},
	}}
}
