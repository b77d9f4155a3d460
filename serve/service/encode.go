package service

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/babelagent/babel/run"
)

// appendView renders the run shape by hand: it is written once per run, on
// the hot path, and reflection was a tenth of a run's cost. The bytes are
// those json.Marshal would give (TestAppendViewMatchesEncodingJSON).
func appendView(b []byte, vj *viewJSON) ([]byte, error) {
	if !json.Valid(vj.Output) {
		return nil, errors.New("the output is not valid JSON")
	}
	b = append(b, `{"run_id":`...)
	b = appendString(b, vj.RunID)
	b = append(b, `,"graph":`...)
	b = appendString(b, vj.Graph)
	b = append(b, `,"principal":`...)
	b = appendString(b, vj.Principal)
	b = append(b, `,"status":`...)
	b = appendString(b, string(vj.Status))
	b = append(b, `,"output":`...)
	b = appendCompact(b, vj.Output)
	if vj.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, vj.Error)
	}
	if vj.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = appendString(b, string(vj.ErrorCode))
	}
	if vj.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = appendString(b, vj.CorrelationID)
	}
	b = append(b, `,"trace":`...)
	if vj.Trace == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range vj.Trace {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTrace(b, &vj.Trace[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"labels":`...)
	b = appendStrings(b, vj.Labels.Names())
	b = append(b, `,"steps":`...)
	b = strconv.AppendInt(b, vj.Steps, 10)
	var err error
	b = append(b, `,"started_at":`...)
	if b, err = appendTime(b, vj.StartedAt); err != nil {
		return nil, err
	}
	if !vj.FinishedAt.IsZero() {
		b = append(b, `,"finished_at":`...)
		if b, err = appendTime(b, vj.FinishedAt); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendTrace(b []byte, t *run.NodeTrace) []byte {
	b = append(b, `{"node":`...)
	b = appendString(b, t.Node)
	b = append(b, `,"status":`...)
	b = appendString(b, string(t.Status))
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, t.DurationMS)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(t.Attempts), 10)
	if t.Iterations != 0 {
		b = append(b, `,"iterations":`...)
		b = strconv.AppendInt(b, int64(t.Iterations), 10)
	}
	if t.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, t.Error)
	}
	if len(t.Warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, t.Warnings)
	}
	if t.Route != "" {
		b = append(b, `,"route":`...)
		b = appendString(b, t.Route)
	}
	if len(t.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendStrings(b, t.Labels)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil, errors.New("time year outside of range [0,9999]")
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendFloat formats f as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendCompact appends valid JSON without insignificant space, with <, >,
// & and U+2028/9 in strings escaped, as json.Marshal does a RawMessage.
func appendCompact(b, src []byte) []byte {
	inStr, esc := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			case c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
				continue
			case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
				i += 2
				continue
			}
			b = append(b, c)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inStr = true
		}
		b = append(b, c)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// (HTML-safe, invalid UTF-8 as U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
