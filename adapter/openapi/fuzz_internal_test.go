package openapi

import (
	"os"
	"testing"
)

// FuzzDocument: any document either yields an operation's input schema or
// an error; loading never panics and never reads outside the document.
func FuzzDocument(f *testing.F) {
	for _, name := range []string{"tickets.yaml", "tickets31.json"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"openapi":"3.0.0","info":{"title":"t","version":"1"},"paths":{"/a/{x}":{"get":{"operationId":"a","parameters":[{"name":"x","in":"path","required":true,"schema":{"$ref":"#/components/schemas/X"}}],"responses":{"200":{"description":"ok"}}}}},"components":{"schemas":{"X":{"type":"object","properties":{"x":{"$ref":"#/components/schemas/X"}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := parse("fuzz", data)
		if err != nil || doc.Paths == nil {
			return
		}
		for _, item := range doc.Paths.Map() {
			for _, op := range item.Operations() {
				a := &Agent{}
				_, _ = a.inputs(doc, item, op)
			}
		}
	})
}
