package graph

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// credentialPatterns match literal credentials that must never sit in a
// topology file; a secret is declared by name and supplied at run time.
var credentialPatterns = []struct {
	what string
	re   *regexp.Regexp
}{
	{"an API key (sk-...)", regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}`)},
	{"an AWS access key", regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"a GitHub token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`)},
	{"a Slack token", regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{"a Google API key", regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`)},
	{"a JWT", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{"a private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"a bearer token", regexp.MustCompile(`(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=\-]{12,}`)},
}

var credentialKey = regexp.MustCompile(`(?i)(?:^|_|-)(?:api_?key|apikey|token|secret|password|passwd|authorization|auth_header|private_key|access_key)$`)

// LooksLikeCredential says what kind of credential s appears to hold, or "".
func LooksLikeCredential(s string) string {
	for _, p := range credentialPatterns {
		if p.re.MatchString(s) {
			return p.what
		}
	}
	if strings.Contains(s, "://") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				return "a password in a URL"
			}
		}
	}
	return ""
}

func (c *compiler) scanCredentials(node, field, s string) {
	if what := LooksLikeCredential(s); what != "" {
		c.add(node, field, "literal credential (%s): declare the secret's name under secrets: and supply its value from the environment, a 0600 file or the keyring", what)
	}
}

// scanConfig walks an agent's configuration for literal credentials, and for
// credential-named keys that hold a literal value.
func (c *compiler) scanConfig(node, field string, v any) {
	switch x := v.(type) {
	case string:
		c.scanCredentials(node, field, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := field + "." + k
			if s, ok := x[k].(string); ok && s != "" && credentialKey.MatchString(k) && !isSecretReference(s) {
				c.add(node, sub, "literal credential in %q: name the secret under secrets: and refer to it as {{secret:NAME}}", k)
				continue
			}
			c.scanConfig(node, sub, x[k])
		}
	case []any:
		for i, e := range x {
			c.scanConfig(node, fmt.Sprintf("%s[%d]", field, i), e)
		}
	}
}

// isSecretReference reports whether s names a secret rather than holding one.
func isSecretReference(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{{secret:") && strings.HasSuffix(s, "}}") || validSecretName(s) && strings.ToUpper(s) == s
}
