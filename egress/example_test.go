package egress_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/babelagent/babel/egress"
)

// A test in another package reaches its own httptest server by opting that
// exact address in; every other loopback or private target stays refused.
func ExampleAllowPrivateURL() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	c, err := egress.New(&egress.Options{AllowPrivate: []string{egress.AllowPrivateURL(srv.URL)}})
	if err != nil {
		panic(err)
	}
	resp, err := c.HTTPClient().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))

	_, err = c.HTTPClient().Get("http://169.254.169.254/latest/meta-data/")
	var pe *egress.PolicyError
	fmt.Println(errors.As(err, &pe), pe)
	// Output:
	// hello
	// true egress refused: 169.254.169.254: link-local address
}

func ExampleClient_Check() {
	c, err := egress.New(&egress.Options{Allowlist: []string{"api.example.com", "*.corp.example"}})
	if err != nil {
		panic(err)
	}
	for _, u := range []string{
		"https://api.example.com/v1",
		"https://build.corp.example/",
		"https://corp.example/",
		"http://good.com@0177.0.0.1/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"file:///etc/passwd",
	} {
		fmt.Println(c.Check(u))
	}
	// Output:
	// <nil>
	// <nil>
	// egress refused: corp.example: host not in allowlist
	// egress refused: 127.0.0.1 (0177.0.0.1): loopback address
	// egress refused: 64:ff9b::a9fe:a9fe: link-local address (nat64 embedding 169.254.169.254)
	// egress refused: file:///etc/passwd: scheme "file" not allowed
}
