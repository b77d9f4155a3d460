package openapi

import (
	"encoding/json"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// maxSchemaDepth bounds $ref inlining: a recursive schema deeper than this
// accepts any value past that depth (the document's own validator still
// checks the request in full).
const maxSchemaDepth = 12

// converter renders OpenAPI schemas as self-contained JSON Schema 2020-12:
// what the card's input schema is, so the kernel and a model can use it.
// References to components are inlined; OpenAPI 3.0's nullable and
// boolean exclusive bounds become their 2020-12 forms; keywords that only
// annotate (example, xml, discriminator) are dropped.
type converter struct {
	doc   *openapi3.T
	oas30 bool
}

func (c *converter) ref(sr *openapi3.SchemaRef, depth int) map[string]any {
	if sr == nil || depth > maxSchemaDepth {
		return map[string]any{}
	}
	if sr.Ref != "" {
		if s := c.component(sr.Ref); s != nil {
			return c.ref(&openapi3.SchemaRef{Value: s}, depth+1)
		}
	}
	if sr.Value == nil {
		return map[string]any{}
	}
	raw, err := json.Marshal(sr.Value)
	if err != nil {
		return map[string]any{}
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return map[string]any{}
	}
	return c.fix(m, depth)
}

func (c *converter) component(ref string) *openapi3.Schema {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || c.doc.Components == nil {
		return nil
	}
	if sr := c.doc.Components.Schemas[name]; sr != nil {
		return sr.Value
	}
	return nil
}

func (c *converter) fix(m map[string]any, depth int) map[string]any {
	if depth > maxSchemaDepth {
		return map[string]any{}
	}
	if ref, ok := m["$ref"].(string); ok {
		if s := c.component(ref); s != nil {
			return c.ref(&openapi3.SchemaRef{Value: s}, depth+1)
		}
		return map[string]any{}
	}
	for _, k := range []string{"example", "examples", "xml", "discriminator", "externalDocs", "$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef"} {
		delete(m, k)
	}
	if c.oas30 {
		if nullable, _ := m["nullable"].(bool); nullable {
			if t, ok := m["type"].(string); ok {
				m["type"] = []any{t, "null"}
			}
		}
		delete(m, "nullable")
		for _, b := range [][2]string{{"exclusiveMaximum", "maximum"}, {"exclusiveMinimum", "minimum"}} {
			if on, ok := m[b[0]].(bool); ok {
				delete(m, b[0])
				if v, has := m[b[1]]; on && has {
					m[b[0]] = v
					delete(m, b[1])
				}
			}
		}
	}
	for _, k := range []string{"items", "not", "additionalProperties", "contains", "propertyNames", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"} {
		if sub, ok := m[k].(map[string]any); ok {
			m[k] = c.fix(sub, depth+1)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if list, ok := m[k].([]any); ok {
			for i, e := range list {
				if sub, ok := e.(map[string]any); ok {
					list[i] = c.fix(sub, depth+1)
				}
			}
		}
	}
	for _, k := range []string{"properties", "patternProperties", "$defs", "dependentSchemas"} {
		if props, ok := m[k].(map[string]any); ok {
			for name, e := range props {
				if sub, ok := e.(map[string]any); ok {
					props[name] = c.fix(sub, depth+1)
				}
			}
		}
	}
	return m
}
