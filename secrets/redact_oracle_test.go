package secrets

import (
	"regexp"
	"strings"
	"testing"
)

// oracle holds the hand-written matchers of scanPatterns to the regular
// expressions they implement: every part of the input that one of these
// would redact must be redacted. group is the submatch that is redacted.
var oracle = []struct {
	name  string
	re    *regexp.Regexp
	group int
	valid func(string) bool
}{
	{name: "aws-access-key-id", re: regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}`)},
	{name: "google-api-key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
	{name: "sk-api-key", re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`)},
	{name: "stripe-key", re: regexp.MustCompile(`\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`)},
	{name: "github-token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`)},
	{name: "slack-token", re: regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{name: "pem-private-key", re: regexp.MustCompile(
		`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)`)},
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`)},
	{name: "authorization-header", group: 1, re: regexp.MustCompile(
		`\b` + ci("authorization") + `\b(?:\\?["'])?\s*[:=]\s*[\["'\\]*\s*` +
			`(?:(?:` + ci("bearer") + `|` + ci("basic") + `|` + ci("token") + `|` + ci("bot") + `|` +
			ci("digest") + `|` + ci("negotiate") + `)\s+)?` +
			`([^\s"'\\,;\[\]{}]+)`)},
	{name: "aws-secret-access-key", group: 1, re: regexp.MustCompile(
		ci("aws_secret_access_key") + `(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?([A-Za-z0-9/+=]{40})`)},
	{name: "bearer-token", group: 1, valid: hasDigit,
		re: regexp.MustCompile(`\bBearer\s+([A-Za-z0-9._~+/-]{16,}=*)`)},
	{name: "basic-credentials", group: 1, valid: isBasicCredential,
		re: regexp.MustCompile(`\bBasic\s+([A-Za-z0-9+/]{4,}={0,2})`)},
	{name: "url-password", group: 1,
		re: regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@`)},
}

// ci spells word case-insensitively for ASCII only (Go's (?i) would also
// fold 'k' to the Kelvin sign, which the matchers rightly ignore).
func ci(word string) string {
	out := ""
	for _, c := range []byte(word) {
		if isLetter(c) {
			out += "[" + string(c&^0x20) + string(c|0x20) + "]"
		} else {
			out += regexp.QuoteMeta(string(c))
		}
	}
	return out
}

func checkAgainstOracle(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(s, Redacted) {
		return // the matchers leave redacted text alone; the oracle does not know it
	}
	spans := scanPatterns(s, nil)
	covered := func(lo, hi int) bool {
		for i := lo; i < hi; i++ {
			in := false
			for _, sp := range spans {
				if sp.lo <= i && i < sp.hi {
					in = true
					break
				}
			}
			if !in {
				return false
			}
		}
		return true
	}
	for _, o := range oracle {
		for _, m := range o.re.FindAllStringSubmatchIndex(s, -1) {
			lo, hi := m[2*o.group], m[2*o.group+1]
			if lo < 0 || lo == hi || o.valid != nil && !o.valid(s[lo:hi]) {
				continue
			}
			if !covered(lo, hi) {
				t.Fatalf("%s: oracle redacts %q in %q; matchers found %v", o.name, s[lo:hi], s, spans)
			}
		}
	}
}

func TestMatchersAgreeWithOracle(t *testing.T) {
	for _, s := range oracleSeeds {
		checkAgainstOracle(t, s)
	}
}

var oracleSeeds = []string{
	"AKIAIOSFODNN7EXAMPLE", "xAKIAIOSFODNN7EXAMPLE", "Authorization: x", "sk-abcdefghijklmnopqr",
	"-----BEGIN PRIVATE KEY-----", "eyJa.bc.d", "Basic YTpi", "Bearer 0123456789abcdefg", "a://b:c@d",
	"ghp_abcdefghijabcdefghij", "github_pat_abcdefghijabcdefghij", "xoxb-0123456789", "sk_live_0123456789abcdef",
	"aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AIzaSyD-1234567890abcdefghijklmnopqrstu",
	`\"Authorization\":\"Bearer \"`, "authorization: Bearer ", "Authorization:[Basic] x", "x://a:b:c@d@e",
	"-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY----- -----BEGIN EC PRIVATE KEY-----\nxyz",
}

// FuzzMatchersAgreeWithOracle: the fast matchers never miss what the
// regular expressions would redact.
func FuzzMatchersAgreeWithOracle(f *testing.F) {
	for _, s := range oracleSeeds {
		f.Add(s)
	}
	f.Fuzz(checkAgainstOracle)
}
