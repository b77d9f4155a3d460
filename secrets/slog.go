package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// NewRedactingHandler returns a slog.Handler that redacts every record with
// r before passing it to h: the message, every string attribute (inside
// groups too), error values, byte slices, and any other value whose printed
// or JSON form holds a secret. An attribute whose key names a credential
// (see SensitiveKey) is replaced whole. r may be nil (patterns only); h must
// not be.
func NewRedactingHandler(h slog.Handler, r *Redactor) slog.Handler {
	return &redactingHandler{h: h, r: r}
}

type redactingHandler struct {
	h slog.Handler
	r *Redactor
}

func (rh *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return rh.h.Enabled(ctx, l)
}

func (rh *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rh.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(rh.attr(a))
		return true
	})
	return rh.h.Handle(ctx, out)
}

func (rh *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = rh.attr(a)
	}
	return &redactingHandler{h: rh.h.WithAttrs(red), r: rh.r}
}

func (rh *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{h: rh.h.WithGroup(rh.r.Redact(name)), r: rh.r}
}

func (rh *redactingHandler) attr(a slog.Attr) slog.Attr {
	a.Key = rh.r.Redact(a.Key)
	v := a.Value.Resolve()
	if SensitiveKey(a.Key) && v.Kind() != slog.KindGroup {
		if s := v.String(); s != "" && s != Redacted {
			return slog.String(a.Key, Redacted)
		}
	}
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(rh.r.Redact(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		red := make([]slog.Attr, len(attrs))
		for i, ga := range attrs {
			red[i] = rh.attr(ga)
		}
		a.Value = slog.GroupValue(red...)
	case slog.KindAny:
		a.Value = rh.anyValue(v)
	default:
		a.Value = v
	}
	return a
}

// anyValue redacts a value a handler would print with fmt or encode as
// JSON. The value is kept as it is unless one of those forms holds a
// secret; then the redacted form replaces it.
func (rh *redactingHandler) anyValue(v slog.Value) slog.Value {
	switch x := v.Any().(type) {
	case nil:
		return v
	case error:
		return slog.StringValue(rh.r.Redact(x.Error()))
	case json.RawMessage:
		return slog.AnyValue(rh.r.RedactJSON(x))
	case []byte:
		return slog.AnyValue(rh.r.RedactBytes(x))
	default:
		text := fmt.Sprintf("%+v", x)
		if red, changed := rh.r.redact(text); changed {
			return slog.StringValue(red)
		}
		if b, err := json.Marshal(x); err == nil {
			if red := rh.r.RedactJSON(b); string(red) != string(b) {
				return slog.AnyValue(json.RawMessage(red))
			}
		}
		return v
	}
}
