// Package demo embeds the topology that `babel demo` runs.
package demo

import _ "embed"

// Triage is an offline graph showing fan-out, a branch, a join and a gate.
//
//go:embed triage.yaml
var Triage []byte

// TriageInput is the ticket the demo triages.
const TriageInput = "   The app crashes when I upload a photo from my phone.   "
