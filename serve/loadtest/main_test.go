package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
)

func TestLoadGeneratorMeasuresRuns(t *testing.T) {
	defer goleak.VerifyNone(t, leaktest.Options()...)
	rep, err := Run(context.Background(), Options{Requests: 300, Duration: 20 * time.Second, Connections: 8})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 300 || rep.Errors != 0 || rep.P50 <= 0 || rep.P99 < rep.P50 || rep.RunsPerSec <= 0 {
		t.Errorf("report: %+v", rep)
	}
}

func TestLoadGeneratorTargetsLoopbackOnly(t *testing.T) {
	for _, u := range []string{"http://example.com:7077", "http://10.0.0.1:7077", "http://0.0.0.0:7077"} {
		if _, err := Run(context.Background(), Options{Requests: 1, Duration: time.Second, Connections: 1, URL: u}); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
}
