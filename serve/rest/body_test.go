package rest

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestParseRunBody(t *testing.T) {
	good := map[string]string{
		`{"input":"x"}`: `"x"`,
		` { "input" : {"a":[1,{"b":"}"}]} , "wait" : true } `: `{"a":[1,{"b":"}"}]}`,
		`{"wait":false,"deadline_s":1.5,"input":null}`:        `null`,
		`{"\u0069nput":[],"deadline_s":null}`:                 `[]`,
		`{"input":"a\"b\\","deadline_s":"inf"}`:               `"a\"b\\"`,
		`{"input":-1.5e3}`:                                    `-1.5e3`,
	}
	for in, want := range good {
		var b runBody
		if err := parseRunBody([]byte(in), &b); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if string(b.Input) != want {
			t.Errorf("%s: input %s, want %s", in, b.Input, want)
		}
	}
	for _, in := range []string{``, `{`, `{not json`, `[]`, `"x"`, `{}`, `{"wait":true}`, `{"input":1,"input":2}`,
		`{"input":1,"extra":2}`, `{"input":1,"wait":"yes"}`, `{"input":1} {}`} {
		var b runBody
		if err := parseRunBody([]byte(in), &b); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseRunBody(f *testing.F) {
	for _, s := range []string{`{"input":"x","wait":true,"deadline_s":2}`, `{"input":{"a":[1,"]}"]}}`, `{"\u0069nput":1}`, `{}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b runBody
		if parseRunBody(data, &b) != nil {
			return
		}
		// Whatever it accepts, encoding/json reads the same input.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %q: %v", data, err)
		}
		var want, got bytes.Buffer
		_ = json.Compact(&want, m["input"])
		_ = json.Compact(&got, b.Input)
		if want.String() != got.String() {
			t.Fatalf("%q: input %s, want %s", data, got.String(), want.String())
		}
	})
}
