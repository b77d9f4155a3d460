package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// MinRegisterLen is the shortest value Register accepts. Shorter values are
// ignored: redacting every "admin" or "12345" in every log line and model
// message would mangle ordinary text and, worse, tell a reader which common
// word is the password. A secret that short should be rotated, not hidden.
const MinRegisterLen = 6

// Redactor replaces secret values in text with [REDACTED]: every value
// registered with it, and common credential shapes (AWS access key ids, sk-
// and sk-ant- API keys, GitHub and Slack tokens, JWTs, PEM private keys,
// Authorization header values, Google API keys, AWS secret keys and
// passwords in URLs) whether registered or not.
//
// A Redactor is safe for concurrent use. Registration only ever adds: there
// is no way to unregister a value or to turn redaction off. A nil *Redactor
// redacts the credential shapes only; Register on it panics. The zero value
// is ready to use.
type Redactor struct {
	mu      sync.Mutex          // serialises Register
	seen    map[string]struct{} // every needle in needles, under mu
	needles atomic.Pointer[[]needle]
}

// Generation counts what has been registered. It only grows: text
// redacted at one generation is redacted for a later one too if the
// generation has not changed.
func (r *Redactor) Generation() int {
	if r == nil {
		return 0
	}
	if p := r.needles.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{} }

// Register adds values to be redacted. Values shorter than MinRegisterLen
// bytes are ignored. Besides each value itself, its JSON-escaped and
// URL-escaped forms are registered, and for a multi-line value (a PEM key)
// each long line, so that the value is caught however it was encoded.
func (r *Redactor) Register(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var add []string
	for _, v := range values {
		for _, n := range needleVariants(v) {
			if _, ok := r.seen[n]; ok {
				continue
			}
			if r.seen == nil {
				r.seen = make(map[string]struct{})
			}
			r.seen[n] = struct{}{}
			add = append(add, n)
		}
	}
	if len(add) == 0 {
		return
	}
	var cur []needle
	if p := r.needles.Load(); p != nil {
		cur = *p
	}
	next := make([]needle, 0, len(cur)+len(add))
	next = append(next, cur...)
	for _, a := range add {
		next = append(next, newNeedle(a))
	}
	r.needles.Store(&next)
}

func needleVariants(v string) []string {
	if len(v) < MinRegisterLen {
		return nil
	}
	out := []string{v}
	addVariant := func(n string) {
		if len(n) >= MinRegisterLen && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if b, err := json.Marshal(v); err == nil {
		addVariant(string(b[1 : len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		addVariant(string(b[1 : len(b)-1]))
	}
	addVariant(url.QueryEscape(v))
	addVariant(url.PathEscape(v))
	if strings.ContainsAny(v, "\r\n") {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
			line = strings.TrimSpace(line)
			// Lines this long are key material; PEM armour lines are not secret.
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				addVariant(line)
			}
		}
	}
	return out
}

// Redact returns s with every registered value and credential pattern
// replaced by [REDACTED]. When there is nothing to replace it returns s
// itself without allocating.
func (r *Redactor) Redact(s string) string {
	out, _ := r.redact(s)
	return out
}

// RedactBytes is Redact for a byte slice. When there is nothing to replace
// it returns b itself; otherwise a new slice, leaving b untouched.
func (r *Redactor) RedactBytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	out, changed := r.redact(bytesView(b))
	if !changed {
		return b
	}
	return []byte(out)
}

// RedactError returns an error whose message is err's, redacted, or err
// itself when its message needs nothing redacted (and nil for nil). The
// result unwraps to err so that errors.Is and errors.As still classify it;
// whatever a caller pulls out that way is not redacted.
func (r *Redactor) RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red, changed := r.redact(msg)
	if !changed {
		return err
	}
	return &RedactedError{msg: red, err: err}
}

// RedactedError is an error whose message has been redacted.
type RedactedError struct {
	msg string
	err error
}

func (e *RedactedError) Error() string { return e.msg }
func (e *RedactedError) Unwrap() error { return e.err }

// bytesView reads b as a string without copying. The string must not
// outlive the call that made it, and b must not change meanwhile.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

type span struct{ lo, hi int }

// needle is a registered string and the offset of its rarest byte, which is
// what the search looks for first: a byte that ordinary text seldom holds
// keeps the clean path to one vectorised scan per needle.
type needle struct {
	s   string
	off int
}

func newNeedle(s string) needle {
	n := needle{s: s}
	for i := 1; i < len(s); i++ {
		if byteRarity(s[i]) > byteRarity(s[n.off]) {
			n.off = i
		}
	}
	return n
}

// commonBytes lists bytes from the most to the least common in logs,
// JSON and prose (roughly: letter frequencies, then the digits, punctuation
// and capitals of timestamps and log levels). A byte not listed is rarer
// than any listed.
const commonBytes = " \netaoinsrhldcumfpgwyb0\":,.{}/-_=1[]2vkTSAIEO34()56789xjqzCMPRNBDFHLWGUZKYVJQX"

// byteRarity ranks how seldom a byte shows up: higher is rarer.
func byteRarity(c byte) int {
	if i := strings.IndexByte(commonBytes, c); i >= 0 {
		return i
	}
	return len(commonBytes)
}

// index returns the first index >= from at which n occurs in s, or -1. It
// hops between occurrences of the needle's rarest byte; if that byte turns
// out to be common in s, it hands over to strings.Index.
func (n needle) index(s string, from int) int {
	c := n.s[n.off]
	misses := 0
	for i := from + n.off; ; {
		j := indexFrom(s, i, c)
		if j < 0 {
			return -1
		}
		st := j - n.off
		if st+len(n.s) > len(s) {
			return -1
		}
		if s[st:st+len(n.s)] == n.s {
			return st
		}
		if misses++; misses > 16 {
			if k := strings.Index(s[st+1:], n.s); k >= 0 {
				return st + 1 + k
			}
			return -1
		}
		i = j + 1
	}
}

// redact is the one implementation behind every Redact variant. It reports
// whether anything was replaced.
func (r *Redactor) redact(s string) (string, bool) {
	var spans []span
	if r != nil && len(s) >= MinRegisterLen { // no needle is shorter
		if p := r.needles.Load(); p != nil {
			for _, n := range *p {
				for i := n.index(s, 0); i >= 0; i = n.index(s, i+1) {
					spans = append(spans, span{i, i + len(n.s)})
				}
			}
		}
	}
	spans = scanPatterns(s, spans)
	if len(spans) == 0 {
		return s, false
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	var sb strings.Builder
	sb.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		lo, hi := spans[i].lo, spans[i].hi
		for i++; i < len(spans) && spans[i].lo <= hi; i++ {
			hi = max(hi, spans[i].hi)
		}
		sb.WriteString(s[last:lo])
		sb.WriteString(Redacted)
		last = hi
	}
	sb.WriteString(s[last:])
	return sb.String(), true
}

// scanPatterns appends to spans the credential shapes found in s. Each
// shape is found from a byte that ordinary text seldom holds (the '-' of
// sk- and xox?-, the '_' of ghp_, the 'z' of authorization, the 'J' of eyJ,
// the 'A' of AKIA, the 'B' of Bearer, the '@' of user:pass@host), located
// with a vectorised byte scan and then checked by hand against the bytes
// around it. On text that holds none of them this costs a few scans and
// allocates nothing. The shapes, as regular expressions (the test oracle
// in redact_oracle_test.go holds the matchers to them):
//
//	aws access key id   \b(?:AKIA|ASIA)[A-Z0-9]{16}
//	google api key      \bAIza[0-9A-Za-z_-]{35}
//	sk- api key         \bsk-[A-Za-z0-9_-]{16,}           (OpenAI, Anthropic sk-ant-, ...)
//	stripe key          \b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}
//	github token        \bgh[pousr]_[A-Za-z0-9]{20,} | \bgithub_pat_[A-Za-z0-9_]{20,}
//	slack token         \bxox[abprs]-[A-Za-z0-9-]{10,}
//	jwt                 \beyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*
//	pem private key     -----BEGIN ... PRIVATE KEY----- through -----END ... PRIVATE KEY----- (or the end)
//	authorization       the value after "Authorization:" or "authorization=" (any case, quoted or
//	                    not), after a Bearer/Basic/Token/Bot/Digest/Negotiate scheme if there is one
//	aws secret key      the 40 characters after aws_secret_access_key= (any case)
//	bearer token        \bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)  holding a digit
//	basic credentials   \bBasic\s+([A-Za-z0-9+/]{4,}={0,2})   decoding to user:password
//	url password        scheme://user:(password)@
func scanPatterns(s string, spans []span) []span {
	if len(s) <= shortText && !hasTrigger(s) {
		return spans // a walk over a few bytes beats eight scans of them
	}
	add := func(lo, hi int) { spans = append(spans, span{lo, hi}) }
	for i := indexFrom(s, 0, '-'); i >= 0; i = indexFrom(s, i+1, '-') {
		if i >= 2 && s[i-2:i] == "sk" && boundaryBefore(s, i-2) {
			if end := runOf(s, i+1, isB64URL); end-(i+1) >= 16 {
				add(i-2, end)
			}
		}
		if i >= 4 && s[i-4:i-1] == "xox" && strings.IndexByte("abprs", s[i-1]) >= 0 && boundaryBefore(s, i-4) {
			if end := runOf(s, i+1, isAlnumDash); end-(i+1) >= 10 {
				add(i-4, end)
			}
		}
		if strings.HasPrefix(s[i:], "-----BEGIN") {
			if loc := pemBlock.FindStringIndex(s[i:]); loc != nil {
				add(i, i+loc[1])
				i += loc[1] - 1
			}
		}
	}
	for i := indexFrom(s, 0, '_'); i >= 0; i = indexFrom(s, i+1, '_') {
		if i >= 3 && s[i-3:i-1] == "gh" && strings.IndexByte("pousr", s[i-1]) >= 0 && boundaryBefore(s, i-3) {
			if end := runOf(s, i+1, isAlnum); end-(i+1) >= 20 {
				add(i-3, end)
			}
		}
		if i >= 6 && s[i-6:i] == "github" && strings.HasPrefix(s[i:], "_pat_") && boundaryBefore(s, i-6) {
			if end := runOf(s, i+5, isWord); end-(i+5) >= 20 {
				add(i-6, end)
			}
		}
		if i >= 2 && (s[i-2:i] == "sk" || s[i-2:i] == "rk") && boundaryBefore(s, i-2) &&
			(strings.HasPrefix(s[i+1:], "live_") || strings.HasPrefix(s[i+1:], "test_")) {
			if end := runOf(s, i+6, isAlnum); end-(i+6) >= 16 {
				add(i-2, end)
			}
		}
		const awsKey = "aws_secret_access_key"
		if i >= 3 && len(s)-(i-3) >= len(awsKey) && strings.EqualFold(s[i-3:i-3+len(awsKey)], awsKey) {
			p := skipQuote(s, i-3+len(awsKey))
			p = runOf(s, p, isSpace)
			if p < len(s) && (s[p] == ':' || s[p] == '=') {
				p = skipQuote(s, runOf(s, p+1, isSpace))
				if end := runOf(s, p, isAWSSecretByte); end-p >= 40 {
					add(p, end)
				}
			}
		}
	}
	for i := indexFrom(s, 0, 'A'); i >= 0; i = indexFrom(s, i+1, 'A') {
		switch rest := s[i:]; {
		case (strings.HasPrefix(rest, "AKIA") || strings.HasPrefix(rest, "ASIA")) && boundaryBefore(s, i):
			if end := runOf(s, i+4, isUpperDigit); end-(i+4) >= 16 {
				add(i, end)
			}
		case strings.HasPrefix(rest, "AIza") && boundaryBefore(s, i):
			if end := runOf(s, i+4, isB64URL); end-(i+4) >= 35 {
				add(i, end)
			}
		}
	}
	for _, z := range [2]byte{'z', 'Z'} {
		for i := indexFrom(s, 0, z); i >= 0; i = indexFrom(s, i+1, z) {
			if lo, hi := authorizationValue(s, i); hi > lo {
				add(lo, hi)
			}
		}
	}
	for i := indexFrom(s, 0, 'J'); i >= 0; i = indexFrom(s, i+1, 'J') {
		if i >= 2 && s[i-2:i] == "ey" && boundaryBefore(s, i-2) {
			e1 := runOf(s, i+1, isB64URL)
			if e1-(i+1) < 2 || e1 >= len(s) || s[e1] != '.' {
				continue
			}
			e2 := runOf(s, e1+1, isB64URL)
			if e2-(e1+1) < 2 || e2 >= len(s) || s[e2] != '.' {
				continue
			}
			add(i-2, runOf(s, e2+1, isB64URL))
		}
	}
	for i := indexFrom(s, 0, 'B'); i >= 0; i = indexFrom(s, i+1, 'B') {
		if !boundaryBefore(s, i) {
			continue
		}
		switch rest := s[i:]; {
		case strings.HasPrefix(rest, "Bearer"):
			ws := runOf(s, i+6, isSpace)
			if ws == i+6 {
				continue
			}
			end := runOf(s, ws, isTokenByte)
			if end-ws < 16 {
				continue
			}
			end = runOf(s, end, func(c byte) bool { return c == '=' })
			if hasDigit(s[ws:end]) {
				add(ws, end)
			}
		case strings.HasPrefix(rest, "Basic"):
			ws := runOf(s, i+5, isSpace)
			if ws == i+5 {
				continue
			}
			end := runOf(s, ws, isB64Std)
			if end-ws < 4 {
				continue
			}
			for k := 0; k < 2 && end < len(s) && s[end] == '='; k++ {
				end++
			}
			if isBasicCredential(s[ws:end]) {
				add(ws, end)
			}
		}
	}
	for j := indexFrom(s, 0, '@'); j >= 0; j = indexFrom(s, j+1, '@') {
		if lo, hi := urlPassword(s, j); hi > lo {
			add(lo, hi)
		}
	}
	return spans
}

// pemBlock is a PEM private key from its BEGIN line to its END line, or to
// the end of the text when it was cut short.
var pemBlock = regexp.MustCompile(
	`^-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)`)

// authorizationValue finds the credential after an "authorization" whose
// 'z' is at s[z]: Authorization: Bearer x, "authorization": "x",
// Authorization:[Bearer x] (a Go http.Header), \"Authorization\":\"x\".
func authorizationValue(s string, z int) (lo, hi int) {
	const word = "authorization"
	st, p := z-7, z+6
	if st < 0 || p > len(s) || !strings.EqualFold(s[st:p], word) || !boundaryBefore(s, st) ||
		p < len(s) && isWord(s[p]) {
		return 0, 0
	}
	p = runOf(s, skipQuote(s, p), isSpace)
	if p >= len(s) || s[p] != ':' && s[p] != '=' {
		return 0, 0
	}
	p = runOf(s, p+1, isSpace)
	// Already redacted text stays as it is, so redacting twice changes
	// nothing.
	if strings.HasPrefix(s[p:], Redacted) {
		return 0, 0
	}
	p = runOf(s, p, func(c byte) bool { return c == '[' || c == '"' || c == '\'' || c == '\\' })
	p = runOf(s, p, isSpace)
	// The value proper follows a scheme word, if there is one and anything
	// follows it.
	if w := runOf(s, p, isLetter); w > p && isAuthScheme(s[p:w]) {
		if v := runOf(s, w, isSpace); v > w {
			if strings.HasPrefix(s[v:], Redacted) {
				return 0, 0
			}
			if end := runOf(s, v, isHeaderValueByte); end > v {
				return v, end
			}
		}
	}
	return p, runOf(s, p, isHeaderValueByte)
}

func isAuthScheme(w string) bool {
	for _, s := range [...]string{"bearer", "basic", "token", "bot", "digest", "negotiate"} {
		if strings.EqualFold(w, s) {
			return true
		}
	}
	return false
}

// urlPassword finds the password of scheme://user:password@ whose '@' is
// at s[at].
func urlPassword(s string, at int) (lo, hi int) {
	a := at
	for a > 0 && s[a-1] != '/' && s[a-1] != '@' && !isSpace(s[a-1]) {
		a--
	}
	if a < 4 || s[a-3:a] != "://" || !isSchemeByte(s[a-4]) {
		return 0, 0
	}
	colon := strings.IndexByte(s[a:at], ':')
	if colon < 0 || a+colon+1 == at {
		return 0, 0
	}
	return a + colon + 1, at
}

// skipQuote skips one quote, or one backslash-escaped quote, at s[p].
func skipQuote(s string, p int) int {
	switch {
	case p < len(s) && (s[p] == '"' || s[p] == '\''):
		return p + 1
	case p+1 < len(s) && s[p] == '\\' && (s[p+1] == '"' || s[p+1] == '\''):
		return p + 2
	}
	return p
}

// runOf returns the end of the run of bytes satisfying in from s[i].
func runOf(s string, i int, in func(byte) bool) int {
	for i < len(s) && in(s[i]) {
		i++
	}
	return i
}

// boundaryBefore reports whether s[i] starts a word (regexp's \b, ASCII).
func boundaryBefore(s string, i int) bool { return i == 0 || !isWord(s[i-1]) }

func isLetter(c byte) bool     { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool      { return isLetter(c) || isDigit(c) }
func isWord(c byte) bool       { return isAlnum(c) || c == '_' }
func isB64URL(c byte) bool     { return isWord(c) || c == '-' }
func isAlnumDash(c byte) bool  { return isAlnum(c) || c == '-' }
func isUpperDigit(c byte) bool { return 'A' <= c && c <= 'Z' || isDigit(c) }
func isB64Std(c byte) bool     { return isAlnum(c) || c == '+' || c == '/' }
func isSpace(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }
func isSchemeByte(c byte) bool { return isAlnum(c) || c == '+' || c == '.' || c == '-' }

func isAWSSecretByte(c byte) bool { return isB64Std(c) || c == '=' }
func isTokenByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '-'
}
func isHeaderValueByte(c byte) bool {
	return !isSpace(c) && strings.IndexByte(`"'\,;[]{}`, c) < 0
}

// shortText is the length up to which scanPatterns first looks for a
// trigger byte one byte at a time.
const shortText = 64

// triggers are the bytes scanPatterns finds every shape from: text without
// any of them holds no shape. A new shape found from another byte must be
// added here (the oracle test checks short text too).
var triggers = func() (t [256]bool) {
	for _, c := range []byte("-_AzZJB@") {
		t[c] = true
	}
	return t
}()

func hasTrigger(s string) bool {
	for i := 0; i < len(s); i++ {
		if triggers[s[i]] {
			return true
		}
	}
	return false
}

func indexFrom(s string, from int, c byte) int {
	if from >= len(s) {
		return -1
	}
	if j := strings.IndexByte(s[from:], c); j >= 0 {
		return from + j
	}
	return -1
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

// isBasicCredential tells "Basic dXNlcjpwYXNz" (user:pass) from prose such
// as "Basic usage".
func isBasicCredential(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return false
		}
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, ':') < 0 {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
