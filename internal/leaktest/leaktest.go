// Package leaktest holds the goleak options the project's tests share.
package leaktest

import "go.uber.org/goleak"

// Options are the goroutines no test should count as leaked, then extra:
// the scheduler's parked workers (package run), which hold nothing of a
// run while parked and exit after 50 ms idle, and their janitor. A worker
// still inside a node is not parked in the pool, and still counts.
func Options(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		goleak.IgnoreTopFunction("github.com/babelagent/babel/run.(*workerPool).work"),
		// The janitor sleeps (its top frame is time.Sleep) and never runs a node.
		goleak.IgnoreAnyFunction("github.com/babelagent/babel/run.(*workerPool).retire"),
	}, extra...)
}
