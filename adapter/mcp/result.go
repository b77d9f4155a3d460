package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/babelagent/babel/agent"
)

// Metadata keys under which MCP fields without a Part field of their own
// are carried, so a result converts without loss.
const (
	MetaType         = "mcp.type"          // content type of a file part: image, audio, resource, resource_link
	MetaAnnotations  = "mcp.annotations"   // a content block's annotations
	MetaMeta         = "mcp.meta"          // a content block's (or, on the Message, the result's) _meta
	MetaResourceMeta = "mcp.resource_meta" // an embedded resource's own _meta
	MetaText         = "mcp.text"          // true when an embedded resource was text (its Bytes are that text)
	MetaTitle        = "mcp.title"         // a resource link's title
	MetaDescription  = "mcp.description"   // a resource link's description
	MetaSize         = "mcp.size"          // a resource link's size in bytes
	MetaIcons        = "mcp.icons"         // a resource link's icons
)

// toMessage turns a tool result into a Message: text content becomes text
// parts, images, audio, embedded resources and resource links become file
// parts, and structuredContent a data part. A text block that only repeats
// the structured content as JSON (as the spec asks servers to do) is not
// repeated.
func toMessage(res *mcp.CallToolResult) (agent.Message, error) {
	var msg agent.Message
	var structured json.RawMessage
	if res.StructuredContent != nil {
		raw, err := canonical(res.StructuredContent)
		if err != nil {
			return msg, fmt.Errorf("structured content: %w", err)
		}
		structured = raw
	}
	for i, c := range res.Content {
		p, err := toPart(c)
		if err != nil {
			return msg, fmt.Errorf("content block %d: %w", i, err)
		}
		if structured != nil && p.Kind == agent.PartText && len(p.Metadata) == 0 && sameJSON(p.Text, structured) {
			continue
		}
		msg.Parts = append(msg.Parts, p)
	}
	if structured != nil {
		msg.Parts = append(msg.Parts, agent.Part{Kind: agent.PartData, Data: structured})
	}
	if len(res.Meta) > 0 {
		msg.Metadata = map[string]any{MetaMeta: map[string]any(res.Meta)}
	}
	return msg, nil
}

func sameJSON(text string, canon json.RawMessage) bool {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return false
	}
	c, err := canonical(v)
	return err == nil && bytes.Equal(c, canon)
}

func toPart(c mcp.Content) (agent.Part, error) {
	meta := map[string]any{}
	common := func(m mcp.Meta, a *mcp.Annotations) {
		if len(m) > 0 {
			meta[MetaMeta] = map[string]any(m)
		}
		if a != nil {
			meta[MetaAnnotations] = annotationsMap(a)
		}
	}
	var p agent.Part
	switch c := c.(type) {
	case *mcp.TextContent:
		common(c.Meta, c.Annotations)
		p = agent.Part{Kind: agent.PartText, Text: c.Text}
	case *mcp.ImageContent:
		common(c.Meta, c.Annotations)
		meta[MetaType] = "image"
		p = agent.Part{Kind: agent.PartFile, File: &agent.File{MediaType: c.MIMEType, Bytes: nonNil(c.Data)}}
	case *mcp.AudioContent:
		common(c.Meta, c.Annotations)
		meta[MetaType] = "audio"
		p = agent.Part{Kind: agent.PartFile, File: &agent.File{MediaType: c.MIMEType, Bytes: nonNil(c.Data)}}
	case *mcp.EmbeddedResource:
		common(c.Meta, c.Annotations)
		meta[MetaType] = "resource"
		r := c.Resource
		if r == nil {
			return p, fmt.Errorf("embedded resource has no contents")
		}
		f := &agent.File{URI: r.URI, MediaType: r.MIMEType}
		if r.Blob != nil {
			f.Bytes = r.Blob
		} else {
			f.Bytes = []byte(r.Text)
			meta[MetaText] = true
		}
		if len(r.Meta) > 0 {
			meta[MetaResourceMeta] = map[string]any(r.Meta)
		}
		p = agent.Part{Kind: agent.PartFile, File: f}
	case *mcp.ResourceLink:
		common(c.Meta, c.Annotations)
		meta[MetaType] = "resource_link"
		if c.URI == "" {
			return p, fmt.Errorf("resource link has no uri")
		}
		if c.Title != "" {
			meta[MetaTitle] = c.Title
		}
		if c.Description != "" {
			meta[MetaDescription] = c.Description
		}
		if c.Size != nil {
			meta[MetaSize] = *c.Size
		}
		if len(c.Icons) > 0 {
			meta[MetaIcons] = c.Icons
		}
		p = agent.Part{Kind: agent.PartFile, File: &agent.File{Name: c.Name, URI: c.URI, MediaType: c.MIMEType}}
	default:
		return p, fmt.Errorf("content of type %T is not valid in a tool result", c)
	}
	if len(meta) > 0 {
		p.Metadata = meta
	}
	return p, nil
}

func annotationsMap(a *mcp.Annotations) map[string]any {
	raw, err := json.Marshal(a)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// nonNil keeps an empty file a file: agent.Message.Validate wants bytes or a uri.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
