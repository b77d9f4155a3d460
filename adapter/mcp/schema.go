package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
)

// schemaURL is where a tool's input schema is registered while compiling;
// the .invalid domain can never be fetched, and nothing is fetched anyway.
const schemaURL = "https://mcp-tool.invalid/input-schema.json"

// noLoader refuses every reference that leaves the schema document: an
// untrusted schema must not make the compiler read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema refers to %s: references outside the schema are not loaded", url)
}

// compileSchema compiles a tool's input schema (draft 2020-12 unless it
// says otherwise). A nil schema accepts any object.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// validate checks args (a JSON object) against s, returning an
// *agent.InputError naming the first offending field.
func validate(tool string, s *jsonschema.Schema, args []byte) error {
	if s == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &agent.InputError{Agent: tool, Reason: "arguments are not valid JSON: " + err.Error()}
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &agent.InputError{Agent: tool, Reason: err.Error()}
	}
	field, reason := "", ""
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		f := strings.TrimPrefix(u.InstanceLocation, "/")
		if reason == "" || (field == "" && f != "") {
			field, reason = f, u.Error.String()
		}
		if field != "" {
			break // the most specific: a field rather than the whole object
		}
	}
	if reason == "" {
		reason = "arguments do not match the tool's input schema"
	}
	return &agent.InputError{Agent: tool, Field: field, Reason: reason}
}
