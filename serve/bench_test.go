package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRESTRunInProcess is one waited run of the three-node pipeline
// through the whole handler (guard, auth, REST, service, runner, kernel),
// without the network: what the server itself spends per run.
func BenchmarkRESTRunInProcess(b *testing.B) {
	tok, _ := NewTokens(map[string]string{"alice": aliceToken})
	srv, err := New(loadGraphs(b, "pipeline"), &Config{RatePerPrincipal: -1}, &Options{Tokens: tok})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(b.Context())
	h := srv.Handler()
	body := `{"input":"  hello, load  ","wait":true}`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "http://127.0.0.1/v1/graphs/pipeline/runs", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+aliceToken)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}
