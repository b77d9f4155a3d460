package secrets

import (
	"encoding/json"
	"strings"
)

// RedactJSON returns raw with secrets redacted inside every JSON string,
// number and key, and with the whole value of a key that names a credential
// (authorization, password, api_key, access_token, client_secret, cookie,
// ...) replaced. Values are matched after JSON unescaping, so an escaped
// secret is caught too, and the result is valid JSON whenever raw is. Keys
// keep their order and the document its layout. When nothing needs
// redacting, raw itself is returned. Invalid JSON is redacted as text.
func (r *Redactor) RedactJSON(raw json.RawMessage) json.RawMessage {
	return r.redactJSON(raw, true)
}

// redactJSON is RedactJSON; with quick false it takes the long way even
// when one pass over the whole document finds nothing (for tests).
func (r *Redactor) redactJSON(raw json.RawMessage, quick bool) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	if !json.Valid(raw) {
		return r.RedactBytes(raw)
	}
	s := bytesView(raw)
	// With no escapes, every string holds what the document holds at its
	// place: when one pass over the whole finds nothing, no string holds
	// anything either, and only values under a credential-named key change.
	scan := true
	if quick && strings.IndexByte(s, '\\') < 0 {
		if _, changed := r.redact(s); !changed {
			scan = false
		}
	}
	var out []byte
	last := 0
	sensitive := false // the last key read names a credential
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '"':
			end := jsonStringEnd(s, i)
			str := decodeJSONString(s[i:end])
			var red string
			var changed bool
			if nextNonSpace(s, end) == ':' {
				if scan {
					red, changed = r.redact(str)
				}
				sensitive = SensitiveKey(str)
			} else {
				if sensitive && str != "" && str != Redacted {
					red, changed = Redacted, true
				} else if scan {
					red, changed = r.redact(str)
				}
				sensitive = false
			}
			if changed {
				out = append(out, s[last:i]...)
				out = appendJSONString(out, red)
				last = end
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end := i + 1
			for end < len(s) && strings.IndexByte("0123456789+-.eE", s[end]) >= 0 {
				end++
			}
			if sensitive || scan && redacts(r, s[i:end]) {
				out = append(out, s[last:i]...)
				out = appendJSONString(out, Redacted)
				last = end
			}
			sensitive = false
			i = end
		case c == '{' || c == '[' || c == 't' || c == 'f' || c == 'n':
			sensitive = false
			i++
		default:
			i++
		}
	}
	if out == nil {
		return raw
	}
	return append(out, s[last:]...)
}

func redacts(r *Redactor, s string) bool {
	_, changed := r.redact(s)
	return changed
}

// jsonStringEnd returns the index just past the string literal at s[i]
// (s is valid JSON).
func jsonStringEnd(s string, i int) int {
	for j := i + 1; j < len(s); {
		switch s[j] {
		case '\\':
			j += 2
		case '"':
			return j + 1
		default:
			j++
		}
	}
	return len(s)
}

func decodeJSONString(lit string) string {
	if strings.IndexByte(lit, '\\') < 0 {
		return lit[1 : len(lit)-1]
	}
	var s string
	if err := json.Unmarshal([]byte(lit), &s); err != nil {
		return lit
	}
	return s
}

func nextNonSpace(s string, i int) byte {
	for ; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return s[i]
		}
	}
	return 0
}

func appendJSONString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil { // cannot happen for a string; stay valid regardless
		return append(dst, `"`+Redacted+`"`...)
	}
	return append(dst, b...)
}

// SensitiveKey reports whether a field, header or attribute named key holds
// a credential by its name alone (Authorization, password, api_key,
// X-Api-Key, access_token, client_secret, cookie, ...). Case, '-', '_' and
// '.' are ignored. Bare "token" is not on the list: too many APIs use it for
// non-secret things (a model's output tokens).
func SensitiveKey(key string) bool {
	if len(key) > 64 {
		return false
	}
	var buf [64]byte
	n := 0
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '-' || c == '_' || c == '.' || c == ' ':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "authorization", "proxyauthorization", "cookie", "setcookie",
		"password", "passwd", "passphrase", "secret", "clientsecret", "secretkey",
		"apikey", "xapikey", "apitoken", "authtoken", "xauthtoken",
		"accesstoken", "refreshtoken", "idtoken", "sessiontoken", "bearertoken",
		"privatekey", "awssecretaccesskey", "secretaccesskey":
		return true
	}
	return false
}
