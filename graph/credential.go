package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/babelagent/babel/secrets"
)

// LooksLikeCredential reports whether s holds something shaped like a
// credential (an API key, a token, a private key, a password in a URL):
// the same shapes the redactor scrubs from every output.
func LooksLikeCredential(s string) bool {
	var shapes *secrets.Redactor // nil: credential shapes only
	return shapes.Redact(s) != s
}

// credentialKey reports a configuration key that names a credential.
func credentialKey(k string) bool {
	return secrets.SensitiveKey(k) || strings.HasSuffix(strings.ToLower(k), "token")
}

func (c *compiler) scanCredentials(node, field, s string) {
	if LooksLikeCredential(s) {
		c.add(node, field, "literal credential: declare the secret's name under secrets: and supply its value from the environment, a 0600 file or the keyring")
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
			if s, ok := x[k].(string); ok && s != "" && credentialKey(k) && !isSecretReference(s) {
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
	return strings.HasPrefix(s, "{{secret:") && strings.HasSuffix(s, "}}") || secrets.CheckName(s) == nil && strings.ToUpper(s) == s
}
