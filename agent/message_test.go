package agent

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendValue appends exactly what Value returns, or, for text it writes
// itself, the same string.
func FuzzAppendValueMatchesValue(f *testing.F) {
	for _, s := range []string{"x", "", `a"b`, "tab\there", "<script>", "é", "\u2028", `back\slash`, "plain text 123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range []Message{Text(s), {Parts: []Part{{Kind: PartText, Text: s}, {Kind: PartData, Data: json.RawMessage(`{"a":1}`)}}}} {
			want, err := m.Value()
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendValue([]byte("prefix"), m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("AppendValue dropped dst: %q", got)
			}
			got = got[len("prefix"):]
			var a, b any
			if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
				t.Fatalf("AppendValue(%q) = %s, Value = %s: not both JSON", s, got, want)
			}
			ga, _ := json.Marshal(a)
			gb, _ := json.Marshal(b)
			if !bytes.Equal(ga, gb) {
				t.Fatalf("AppendValue(%q) = %s, Value = %s", s, got, want)
			}
		}
	})
}

func TestAppendValueOfNoPartsIsAnError(t *testing.T) {
	out, err := AppendValue([]byte("x"), Message{})
	if err == nil || string(out) != "x" {
		t.Fatalf("AppendValue(empty) = %q, %v; want dst unchanged and an error", out, err)
	}
}
