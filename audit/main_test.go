package audit_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/babelagent/babel/internal/leaktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leaktest.Options()...) }
