package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/babelagent/babel/agent"
)

// Metadata keys under which A2A fields without a field of their own in
// agent.Message are carried, so that nothing is lost either way.
const (
	// On a part: a text or data part's media type and file name, and the
	// URI of a file part that also carries bytes (A2A holds one or the
	// other).
	MetaMediaType = "a2a.media_type"
	MetaFilename  = "a2a.filename"
	MetaFileURI   = "a2a.file_uri"

	// On the Message: the task and context, the task's final state, the
	// remote message's or task's own metadata, and the artifacts (id,
	// name, description, metadata, and how many parts each contributed).
	MetaTaskID    = "a2a.task_id"
	MetaContextID = "a2a.context_id"
	MetaState     = "a2a.state"
	MetaMetadata  = "a2a.metadata"
	MetaArtifacts = "a2a.artifacts"
)

// toA2A builds the message to send from a node's input.
func toA2A(name string, in agent.Message) (*a2a.Message, error) {
	if len(in.Parts) == 0 {
		return nil, &agent.InputError{Agent: name, Reason: "nothing to send: the message has no parts"}
	}
	parts := make([]*a2a.Part, 0, len(in.Parts))
	for i, p := range in.Parts {
		ap, err := partToA2A(p)
		if err != nil {
			return nil, &agent.InputError{Agent: name, Field: fmt.Sprintf("parts[%d]", i), Reason: err.Error()}
		}
		parts = append(parts, ap)
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	if len(in.Metadata) > 0 {
		m.Metadata = maps.Clone(in.Metadata)
	}
	return m, nil
}

func partToA2A(p agent.Part) (*a2a.Part, error) {
	meta := maps.Clone(p.Metadata)
	out := &a2a.Part{}
	take := func(key string) string {
		s, _ := meta[key].(string)
		delete(meta, key)
		return s
	}
	switch p.Kind {
	case agent.PartText:
		out.Content = a2a.Text(p.Text)
		out.MediaType, out.Filename = take(MetaMediaType), take(MetaFilename)
	case agent.PartData:
		dec := json.NewDecoder(bytes.NewReader(p.Data))
		dec.UseNumber() // integers beyond 2^53 keep their digits
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("data is not valid JSON")
		}
		out.Content = a2a.Data{Value: v}
		out.MediaType, out.Filename = take(MetaMediaType), take(MetaFilename)
	case agent.PartFile:
		f := p.File
		switch {
		case f == nil || (f.URI == "" && f.Bytes == nil):
			return nil, fmt.Errorf("file part needs a uri or bytes")
		case f.Bytes != nil:
			out.Content = a2a.Raw(f.Bytes)
			if f.URI != "" {
				if meta == nil {
					meta = map[string]any{}
				}
				meta[MetaFileURI] = f.URI
			}
		default:
			out.Content = a2a.URL(f.URI)
		}
		out.MediaType, out.Filename = f.MediaType, f.Name
	default:
		return nil, fmt.Errorf("unknown part kind %q", p.Kind)
	}
	if len(meta) > 0 {
		out.Metadata = meta
	}
	return out, nil
}

// fromA2A turns received parts into a Message's parts.
func fromA2A(parts []*a2a.Part) ([]agent.Part, error) {
	out := make([]agent.Part, 0, len(parts))
	for i, p := range parts {
		if p == nil {
			return nil, fmt.Errorf("part %d is empty", i)
		}
		ap, err := partFromA2A(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out = append(out, ap)
	}
	return out, nil
}

func partFromA2A(p *a2a.Part) (agent.Part, error) {
	meta := maps.Clone(p.Metadata)
	put := func(key, v string) {
		if v == "" {
			return
		}
		if meta == nil {
			meta = map[string]any{}
		}
		meta[key] = v
	}
	var out agent.Part
	switch c := p.Content.(type) {
	case a2a.Text:
		out = agent.Part{Kind: agent.PartText, Text: string(c)}
		put(MetaMediaType, p.MediaType)
		put(MetaFilename, p.Filename)
	case a2a.Data:
		raw, err := json.Marshal(c.Value)
		if err != nil {
			return out, fmt.Errorf("data: %w", err)
		}
		out = agent.Part{Kind: agent.PartData, Data: raw}
		put(MetaMediaType, p.MediaType)
		put(MetaFilename, p.Filename)
	case a2a.Raw:
		f := &agent.File{Name: p.Filename, MediaType: p.MediaType, Bytes: []byte(c)}
		if f.Bytes == nil {
			f.Bytes = []byte{}
		}
		if u, ok := meta[MetaFileURI].(string); ok {
			f.URI = u
			delete(meta, MetaFileURI)
		}
		out = agent.Part{Kind: agent.PartFile, File: f}
	case a2a.URL:
		if c == "" {
			return out, fmt.Errorf("file part has an empty url")
		}
		out = agent.Part{Kind: agent.PartFile, File: &agent.File{Name: p.Filename, MediaType: p.MediaType, URI: string(c)}}
	case nil:
		return out, fmt.Errorf("part has no content")
	default:
		return out, fmt.Errorf("part content of type %T is not supported", c)
	}
	if len(meta) > 0 {
		out.Metadata = meta
	}
	return out, nil
}
