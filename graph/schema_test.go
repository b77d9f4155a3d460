package graph_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/graph"
)

func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(graph.Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("topology.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("topology.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func yamlValue(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchemaAcceptsEveryShippedTopology(t *testing.T) {
	s := schema(t)
	files, _ := filepath.Glob("testdata/good/*.yaml")
	files = append(files, "../cmd/babel/demo/triage.yaml")
	for _, f := range files {
		if err := s.Validate(yamlValue(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSchemaRejectsUnknownKey(t *testing.T) {
	err := schema(t).Validate(yamlValue(t, "testdata/bad/unknown-key.yaml"))
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("got %v", err)
	}
	var v map[string]any
	if json.Unmarshal(graph.Schema, &v) != nil {
		t.Fatal("schema is not JSON")
	}
}
