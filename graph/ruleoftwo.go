package graph

// RuleOfTwoRow says, for one node, which legs of the Rule of Two it could
// combine: acting on the world (write, egress, exec) in a run that holds
// untrusted data and sensitive data. A node holding all three does not run
// without a human approval.
type RuleOfTwoRow struct {
	Node string `json:"node"`
	// Tool is set for a row about a graph tool (called by a model, not scheduled).
	Tool          bool     `json:"tool,omitempty"`
	Effects       []string `json:"effects"`
	Consequential bool     `json:"consequential"`
	// UntrustedFrom lists the sources of untrusted data in the run (nodes that
	// read from outside, and the run input when a caller other than the
	// principal supplies it).
	UntrustedFrom []string `json:"untrusted_from"`
	SensitiveFrom []string `json:"sensitive_from"`
	AllThree      bool     `json:"all_three"`
	Approval      string   `json:"approval"`
	Verdict       string   `json:"verdict"`
}

// RuleOfTwo returns the graph's static Rule-of-Two table, one row per node.
// It is conservative: labels spread through the run, so any source in the
// graph counts for every node.
func (g *Graph) RuleOfTwo() []RuleOfTwoRow {
	untrusted := []string{"input (when not from the principal)"}
	var sensitive []string
	for _, n := range g.Nodes {
		if n.Card.ReadsOutside && !n.Trusted {
			untrusted = append(untrusted, n.Name)
		}
		if n.Sensitive {
			sensitive = append(sensitive, n.Name)
		}
	}
	rows := make([]RuleOfTwoRow, 0, len(g.Nodes)+len(g.Tools))
	for _, n := range append(append([]*Node{}, g.Nodes...), g.Tools...) {
		r := RuleOfTwoRow{
			Node: n.Name, Tool: n.Index < 0, Consequential: n.Card.Consequential(),
			UntrustedFrom: untrusted, SensitiveFrom: sensitive, Approval: string(n.Approval),
		}
		r.Effects = []string{}
		for _, e := range n.Card.Effects {
			r.Effects = append(r.Effects, string(e))
		}
		if r.SensitiveFrom == nil {
			r.SensitiveFrom = []string{}
		}
		r.AllThree = r.Consequential && len(sensitive) > 0
		switch {
		case r.AllThree:
			r.Verdict = "approval required when untrusted and sensitive data meet"
		case n.Approval == ApprovalRequired:
			r.Verdict = "approval required (declared)"
		case r.Consequential && n.Index < 0:
			r.Verdict = "approval required when a model calls it on untrusted input"
		case r.Consequential:
			r.Verdict = "approval required on untrusted input"
		default:
			r.Verdict = "runs freely (no consequential effect)"
		}
		rows = append(rows, r)
	}
	return rows
}
