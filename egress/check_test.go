package egress

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCheckRefusesEverySpellingOfABlockedTarget(t *testing.T) {
	c := mustNew(t, &Options{AnyPublicHost: true})
	refused := map[string]string{
		"http://good.com@127.0.0.1/":             "loopback",
		"http://good.com:pw@127.0.0.1:8080/":     "loopback",
		"http://127.0.0.1./":                     "loopback",
		"http://127.1/":                          "loopback",
		"http://127.0.1/":                        "loopback",
		"http://0x7f.1/":                         "loopback",
		"http://0x7f000001/":                     "loopback",
		"http://017700000001/":                   "loopback",
		"http://0/":                              "unspecified",
		"http://169.16689662/":                   "link-local",
		"http://0xa9fea9fe/":                     "link-local",
		"http://2852039166/":                     "link-local",
		"http://[::ffff:a9fe:a9fe]/":             "link-local",
		"http://[0:0:0:0:0:ffff:7f00:1]/":        "loopback",
		"http://[::ffff:0:7f00:1]/":              "loopback",
		"http://[::127.0.0.1]/":                  "loopback",
		"http://[64:ff9b:1::a9fe:a9fe]/":         "link-local",
		"http://[2002:7f00:1::]/":                "loopback",
		"http://[2001:0:808:808::80ff:fffe]/":    "loopback",
		"http://[2001:0:a9fe:a9fe::f7f7:f7f7]/":  "link-local",
		"http://[fe80::1%25eth0]/":               "link-local",
		"http://[fec0::1]/":                      "site-local",
		"http://[fd00::1]:8080/":                 "unique local",
		"http://[2001:db8::1]/":                  "documentation",
		"http://192.0.2.1/":                      "documentation",
		"http://[ff02::1]/":                      "multicast",
		"http://255.255.255.255/":                "broadcast",
		"http://LOCALHOST/":                      "localhost name",
		"http://localhost./":                     "localhost name",
		"http://api.localhost/":                  "localhost name",
		"https://a.b.LocalHost./":                "localhost name",
		"http://134744072/":                      "non-canonical ipv4 form",
		"http://010.010.010.010/":                "non-canonical ipv4 form",
		"http://a.1/":                            "malformed ipv4 address",
		"http://1.2.3.4.5/":                      "malformed ipv4 address",
		"http://8.8.8.8:0/":                      "invalid port",
		"http://8.8.8.8:99999/":                  "invalid port",
		"ftp://example.com/":                     "scheme \"ftp\" not allowed",
		"ws://example.com/":                      "scheme \"ws\" not allowed",
		"javascript:alert(1)":                    "scheme \"javascript\" not allowed",
		"//example.com/":                         "missing scheme",
		"http:example.com":                       "opaque url",
		"http:///path":                           "missing host",
		"http://exa mple.com/":                   "malformed url",
		"http://[::1/":                           "malformed url",
		"http://xn--80ak6aa92e.com..":            "empty label",
		"http://%31%32%37.0.0.1/":                "malformed url",
		"http://0x7f.1@example.com@127.0.0.1/":   "loopback",
		"http://example.com#@127.0.0.1/":         "",
		"http://example.com\\@127.0.0.1/":        "malformed url",
		"https://[::ffff:169.254.169.254]:443/x": "link-local",
	}
	for raw, want := range refused {
		err := c.Check(raw)
		if want == "" {
			if err != nil {
				t.Errorf("Check(%q) = %v, want nil", raw, err)
			}
			continue
		}
		pe := asPolicy(t, err, raw)
		if !strings.Contains(pe.Reason, want) {
			t.Errorf("Check(%q) reason %q, want it to contain %q", raw, pe.Reason, want)
		}
	}
	for _, raw := range []string{
		"http://example.com/", "https://EXAMPLE.com.:8443/x?y=1", "http://8.8.8.8./",
		"http://[2606:4700:4700::1111]:443/", "http://[::ffff:8.8.8.8]/", "http://[64:ff9b::808:808]/",
		"http://[2002:808:808::1]/", "http://127.0.0.1.nip.io/",
	} {
		if err := c.Check(raw); err != nil {
			t.Errorf("Check(%q) = %v, want nil", raw, err)
		}
	}
}

func TestAllowlistMatchesExactNamesAndSubdomainWildcards(t *testing.T) {
	c := mustNew(t, &Options{Allowlist: []string{"api.example.com", "*.corp.example", "8.8.8.8", "[2606:4700:4700::1111]", "Mixed.Case.Example."}})
	for raw, ok := range map[string]bool{
		"https://api.example.com/":             true,
		"https://API.EXAMPLE.COM./v1":          true,
		"https://mixed.case.example/":          true,
		"https://x.api.example.com/":           false,
		"https://example.com/":                 false,
		"https://a.corp.example/":              true,
		"https://a.b.corp.example/":            true,
		"https://corp.example/":                false,
		"https://evilcorp.example/":            false,
		"https://a.corp.example.evil.com/":     false,
		"http://8.8.8.8/":                      true,
		"http://[::ffff:8.8.8.8]/":             true,
		"http://134744072/":                    false,
		"http://[2606:4700:4700::1111]/":       true,
		"http://1.1.1.1/":                      false,
		"http://api.example.com@evil.example/": false,
	} {
		err := c.Check(raw)
		if ok && err != nil {
			t.Errorf("Check(%s) = %v, want allowed", raw, err)
		}
		if !ok {
			pe := asPolicy(t, err, raw)
			if pe.Host == "" || !strings.Contains(pe.Error(), pe.Host) {
				t.Errorf("Check(%s) error %q does not name the host", raw, pe.Error())
			}
		}
	}
	pe := asPolicy(t, c.Check("https://evil.example/"), "evil.example")
	if got, want := pe.Error(), "egress refused: evil.example: host not in allowlist"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func TestEmptyAllowlistAllowsNothing(t *testing.T) {
	for _, o := range []*Options{nil, {}, {Allowlist: []string{}}} {
		pe := asPolicy(t, mustNew(t, o).Check("https://example.com/"), "empty allowlist")
		if pe.Reason != "host not in allowlist" {
			t.Errorf("reason %q", pe.Reason)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]*Options{
		"bare wildcard":          {Allowlist: []string{"*"}},
		"inner wildcard":         {Allowlist: []string{"a.*.example.com"}},
		"tld wildcard":           {Allowlist: []string{"*.com"}},
		"ip wildcard":            {Allowlist: []string{"*.1.2.3.4"}},
		"url in allowlist":       {Allowlist: []string{"https://example.com"}},
		"empty allowlist entry":  {Allowlist: []string{""}},
		"opt-in without port":    {AllowPrivate: []string{"127.0.0.1"}},
		"opt-in by name":         {AllowPrivate: []string{"localhost:8080"}},
		"opt-in port 0":          {AllowPrivate: []string{"127.0.0.1:0"}},
		"opt-in metadata":        {AllowPrivate: []string{"169.254.169.254:80"}},
		"opt-in public":          {AllowPrivate: []string{"8.8.8.8:80"}},
		"opt-in unspecified":     {AllowPrivate: []string{"0.0.0.0:80"}},
		"opt-in empty":           {AllowPrivate: []string{AllowPrivateURL("::bad")}},
		"negative redirects":     {FollowRedirects: -1},
		"negative body cap":      {MaxResponseBytes: -1},
		"negative timeout":       {Timeout: -1},
		"unsupported proxy":      {Proxy: mustURL(t, "ftp://proxy.example:21")},
		"proxy without host":     {Proxy: mustURL(t, "http:///")},
		"negative header timout": {ResponseHeaderTimeout: -time.Second},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

func TestErrorsNeverCarryUserinfoOrQuery(t *testing.T) {
	c := mustNew(t, &Options{AnyPublicHost: true})
	for _, raw := range []string{
		"http://alice:hunter2@127.0.0.1/?token=s3cret",
		"ftp://alice:hunter2@example.com/?token=s3cret",
		"http://alice:hunter2@exa mple.com/?token=s3cret",
		"http://alice:hunter2@[::1/",
		"http://alice:hunter2@evil.localhost/#s3cret",
		"http://alice:hunter2/",
	} {
		for _, err := range []error{c.Check(raw), doErr(t, c, raw)} {
			if err == nil {
				t.Errorf("%s was not refused", raw)
				continue
			}
			pe := asPolicy(t, err, raw)
			for _, s := range []string{err.Error(), pe.URL, pe.Host, pe.Addr, pe.Reason} {
				if strings.Contains(s, "hunter2") || strings.Contains(s, "alice") || strings.Contains(s, "s3cret") {
					t.Errorf("%s: error leaks userinfo or query: %q", raw, s)
				}
			}
		}
	}
}

func doErr(t *testing.T, c *Client, raw string) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		return c.Check(raw) // what a caller would see had it parsed
	}
	resp, err := c.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	return err
}
