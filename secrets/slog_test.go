package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

type request struct {
	URL     string
	Headers map[string]string
}

func TestRedactingHandlerScrubsEveryPartOfARecord(t *testing.T) {
	const value = "tok-8b1e55c0ffee"
	r := NewRedactor()
	r.Register(value)
	for _, kind := range []string{"text", "json"} {
		t.Run(kind, func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
			if kind == "json" {
				h = slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
			}
			log := slog.New(NewRedactingHandler(h, r))
			log.With("preset", "with "+value).WithGroup("call").Debug("msg "+value,
				"s", value,
				"err", fmt.Errorf("wrapped: %w", errors.New("inner "+value)),
				"bytes", []byte("b "+value),
				"raw", json.RawMessage(`{"k":"`+value+`"}`),
				"req", request{URL: "https://x/?t=" + value, Headers: map[string]string{"A": value}},
				"ptr", &request{URL: value},
				slog.Group("g", "deep", value, slog.Group("deeper", "err", errors.New(value))),
				"password", "short",
				"Authorization", "Bearer x",
				"aws", "AKIAIOSFODNN7EXAMPLE",
				"n", 42,
			)
			out := buf.String()
			if strings.Contains(out, value) || strings.Contains(out, "AKIAIOSFODNN7EXAMPLE") ||
				strings.Contains(out, "short") || strings.Contains(out, "Bearer x") {
				t.Fatalf("secret in log output:\n%s", out)
			}
			for _, want := range []string{"msg", "with", "wrapped", "inner", "42"} {
				if !strings.Contains(out, want) {
					t.Errorf("lost %q from the record:\n%s", want, out)
				}
			}
			if kind == "json" && !json.Valid(bytes.TrimSpace(buf.Bytes())) {
				t.Fatalf("JSON handler output is invalid:\n%s", out)
			}
		})
	}
}

func TestRedactingHandlerKeepsCleanValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewRedactingHandler(slog.NewJSONHandler(&buf, nil), NewRedactor()))
	log.Info("hello", "req", request{URL: "https://example.com", Headers: map[string]string{"Accept": "*/*"}})
	var rec struct {
		Req request `json:"req"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec.Req.URL != "https://example.com" {
		t.Fatalf("clean struct attr changed: %v %s", err, buf.String())
	}
}

func TestRedactingHandlerHonoursLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewRedactingHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), nil))
	log.Info("quiet")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %s", buf.String())
	}
}
