package a2a_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
)

// TestMain fails the package if a test leaves a goroutine behind: a poll
// loop, a stream reader or a cancel that outlives its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }
