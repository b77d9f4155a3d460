package audit

import "context"

// Sink is where the kernel writes audit records. Append must return only
// once r is durable, and return an error if it is not: the caller then does
// not perform the action r records. *Writer is the Sink to use.
type Sink interface {
	Append(ctx context.Context, r *Record) (int64, error)
}

// Discard is a Sink that keeps nothing and always succeeds. It exists for
// benchmarks of code above the audit log; using it anywhere else switches
// the audit trail off.
type Discard struct{}

// Append does nothing and returns 0.
func (Discard) Append(context.Context, *Record) (int64, error) { return 0, nil }

var _ Sink = Discard{}
