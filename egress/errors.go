package egress

import (
	"net/url"
	"strconv"
	"strings"
)

// PolicyError is a refusal: the target, a redirect or an address breaks the
// client's egress policy. Callers detect it with errors.As; the fields are
// safe to show and to log (no userinfo, no query string).
type PolicyError struct {
	// URL is the refused URL with userinfo, query and fragment removed;
	// empty when the refusal happened at dial time.
	URL string
	// Host is the host as written in the URL or dial address, lowercased.
	Host string
	// Addr is the IP address the decision was taken on, in canonical form,
	// when there is one.
	Addr string
	// Reason says why, e.g. "loopback address" or "host not in allowlist".
	Reason string
}

// Denied marks a refusal by policy: a run that meets one is denied, not failed.
func (e *PolicyError) Denied() bool { return true }

// Retryable is false: the policy will refuse the same request again.
func (e *PolicyError) Retryable() bool { return false }

func (e *PolicyError) Error() string {
	var b strings.Builder
	b.WriteString("egress refused: ")
	switch {
	case e.Addr != "" && e.Host != "" && e.Host != e.Addr:
		b.WriteString(e.Addr + " (" + e.Host + "): ")
	case e.Addr != "":
		b.WriteString(e.Addr + ": ")
	case e.Host != "":
		b.WriteString(e.Host + ": ")
	case e.URL != "":
		b.WriteString(e.URL + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// LimitError reports a response body longer than the client's cap. The
// reader returns it instead of the byte past the cap, so a caller never holds
// more than Limit bytes of one body.
type LimitError struct {
	// Limit is the cap in bytes.
	Limit int64
}

func (e *LimitError) Error() string {
	return "egress: response body exceeds the " + strconv.FormatInt(e.Limit, 10) + "-byte limit"
}

// redactURL renders u without userinfo, query or fragment: the parts that
// can carry credentials.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	v.User = nil
	v.RawQuery = ""
	v.ForceQuery = false
	v.Fragment = ""
	v.RawFragment = ""
	return v.String()
}
