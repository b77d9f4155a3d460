package egress

import "io"

// cappedBody delivers at most limit bytes of a response body, then fails
// with a *LimitError if the body has more. It reads one byte past the cap
// to tell "exactly the cap" from "more".
type cappedBody struct {
	rc    io.ReadCloser
	limit int64
	n     int64
	err   error
}

func newCappedBody(rc io.ReadCloser, limit, contentLength int64) *cappedBody {
	b := &cappedBody{rc: rc, limit: limit}
	if contentLength > limit {
		b.err = &LimitError{Limit: limit}
	}
	return b
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	room := b.limit - b.n
	if int64(len(p)) > room+1 {
		p = p[:room+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > room {
		b.n = b.limit
		b.err = &LimitError{Limit: b.limit}
		return int(room), b.err
	}
	b.n += int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// cappedRWBody keeps the write side of a 101 Switching Protocols body.
type cappedRWBody struct {
	*cappedBody
	w io.Writer
}

func (b cappedRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
