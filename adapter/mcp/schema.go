package mcp

import (
	"bytes"
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/babelagent/babel/agent"
	"github.com/babelagent/babel/graph"
)

// compileSchema compiles a tool's input schema (graph.CompileSchema: no
// reference outside it is loaded, for an untrusted server's schema must not
// make the compiler read a file or the network). A nil schema accepts any
// object.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	return graph.CompileSchema(raw)
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
