package audit_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/babelagent/babel/audit"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys, no whitespace", json.RawMessage(" { \"b\" : 1 ,\n\"a\" : [ true , false , null ] } "), `{"a":[true,false,null],"b":1}`},
		{"nested objects sorted", json.RawMessage(`{"z":{"y":1,"x":{"b":2,"a":1}}}`), `{"z":{"x":{"a":1,"b":2},"y":1}}`},
		{"numbers kept as written", json.RawMessage(`[1.50, 1e3, -0, 12345678901234567890]`), `[1.50,1e3,-0,12345678901234567890]`},
		{"no html escaping", json.RawMessage(`{"s":"<a href='x'>&</a>"}`), `{"s":"<a href='x'>&</a>"}`},
		{"escapes normalized", json.RawMessage(`"\u0041\/\n"`), `"A/\n"`},
		{"go value", struct {
			B int    `json:"b"`
			A string `json:"a"`
		}{2, "x"}, `{"a":"x","b":2}`},
		{"map", map[string]any{"b": 1, "a": []int{1}}, `{"a":[1],"b":1}`},
		{"nil", nil, `null`},
		{"bytes are JSON text", []byte(`{"b":1,"a":2}`), `{"a":2,"b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := audit.Canonical(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonical = %s; want %s", got, tt.want)
			}
			again, err := audit.Canonical(json.RawMessage(got))
			if err != nil || string(again) != string(got) {
				t.Fatalf("not idempotent: %s, %v", again, err)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1,"a":2}`, `{"a":1} {}`, `[1,]`, strings.Repeat("[", 300) + strings.Repeat("]", 300)} {
		if got, err := audit.Canonical(json.RawMessage(in)); err == nil {
			t.Errorf("Canonical(%q) = %s; want an error", in, got)
		}
	}
}

func TestDigest(t *testing.T) {
	if got := audit.Digest([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Digest = %s", got)
	}
}

// FuzzCanonical checks Canonical against encoding/json: it accepts exactly
// the valid JSON without duplicate keys or deep nesting, its output means
// the same thing, and canonicalizing twice changes nothing.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":[1,2,{"c":null}]}`, `"x\u00e9\ud83d\ude00"`, `{"a":1,"a":2}`,
		`[1e5,-0.5,"\u2028",true,false]`, "\"\xff\"", `{"\u0061":1,"a":2}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := audit.Canonical(json.RawMessage(in))
		if err != nil {
			if json.Valid([]byte(in)) && !strings.Contains(err.Error(), "duplicate") && !strings.Contains(err.Error(), "nesting") {
				t.Fatalf("Canonical(%q) rejected valid JSON: %v", in, err)
			}
			return
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("Canonical(%q) accepted invalid JSON", in)
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical(%q) = %q: not valid JSON", in, got)
		}
		if a, b := decode(t, []byte(in)), decode(t, got); !reflect.DeepEqual(a, b) {
			t.Fatalf("Canonical(%q) = %q: means %v, not %v", in, got, b, a)
		}
		again, err := audit.Canonical(json.RawMessage(got))
		if err != nil || string(again) != string(got) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, got, again, err)
		}
	})
}

func decode(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
