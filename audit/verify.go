package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
)

// Problems a TamperError names.
const (
	ProblemMissing      = "missing record"       // a gap in seq: records deleted
	ProblemChainBroken  = "chain broken"         // prev_hash is not the previous record's hash
	ProblemHashMismatch = "hash mismatch"        // the fields do not hash to the stored hash
	ProblemArgsDigest   = "args digest mismatch" // args_digest is not the digest of args
	ProblemBadSignature = "bad signature"        // a batch signature does not verify
	ProblemUnsigned     = "unsigned records"     // records no signature covers
	ProblemTruncated    = "truncated"            // the signed head names records the log lacks
	ProblemHeadMissing  = "head missing"         // the signed head row is gone
	ProblemBadHead      = "bad head signature"   // the head's signature does not verify
	ProblemHeadMismatch = "head mismatch"        // the head disagrees with the record it names
	ProblemMalformed    = "malformed record"     // a field cannot be decoded
)

// TamperError says the log is not what its writer wrote. Seq is the first
// record Verify could not prove authentic: every record before it is
// covered by a valid signature through an intact chain. Problem is one of
// the Problem constants, and Detail says where the problem was found, which
// is Seq itself unless the problem lies inside a batch of several records
// (Seq is then that batch's first record).
type TamperError struct {
	Seq     int64
	Problem string
	Detail  string
}

func (e *TamperError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("audit: log tampered at seq %d: %s", e.Seq, e.Problem)
	}
	return fmt.Sprintf("audit: log tampered at seq %d: %s: %s", e.Seq, e.Problem, e.Detail)
}

// VerifyReport says what Verify checked.
type VerifyReport struct {
	Records    int64  // records read
	Signatures int64  // batch signatures verified
	Verified   int64  // highest seq proven authentic
	LastSeq    int64  // the last record's seq (0 for an empty log)
	LastHash   string // the last record's hash (GenesisHash for an empty log)
	// Head is the signed head: keep it off the host and compare it with a
	// later report's to detect a rollback of the whole file.
	HeadSeq  int64
	HeadHash string
}

// Verify reads the whole log at path and checks it against pub, the
// writer's public key: that seq runs 1, 2, 3... without gaps, that each
// record's prev_hash is the previous record's hash, that each record hashes
// to its hash, that each args_digest matches its args, that every batch
// signature verifies and every record is covered by one, and that the
// signed head names the last record. The first failure is returned as a
// *TamperError, with the report of what was checked up to it. Verify opens
// the log read-only and may run while a Writer appends; it checks the
// snapshot it reads.
func Verify(ctx context.Context, path string, pub ed25519.PublicKey) (*VerifyReport, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit: verify: public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	db, err := openReader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	defer tx.Rollback()
	h, haveHead, err := readHead(ctx, tx) // same snapshot as the records
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, packedQuery())
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	defer rows.Close()

	v := &verifier{pub: pub, rep: &VerifyReport{LastHash: GenesisHash}, next: 1, prev: []byte(GenesisHash), unsigned: 1}
	if err := v.walk(ctx, rows); err != nil {
		return v.rep, err
	}
	if err := v.finish(h, haveHead); err != nil {
		return v.rep, err
	}
	return v.rep, nil
}

// verifier holds the sequential half of Verify: what has been proven so far.
type verifier struct {
	pub      ed25519.PublicKey
	rep      *VerifyReport
	next     int64  // the seq the next record must have
	prev     []byte // the previous record's stored hash
	unsigned int64  // the first record not yet covered by a signature
}

// walk streams rows through parallel hashing workers and checks the results
// in seq order.
func (v *verifier) walk(parent context.Context, rows *sql.Rows) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	workers := max(runtime.GOMAXPROCS(0), 1)
	work := make(chan *chunk, workers)
	ordered := make(chan *chunk, 2*workers)
	free := make(chan *chunk, 3*workers+2)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range work {
				c.check(v.pub)
				close(c.done)
			}
		})
	}
	var readErr error
	wg.Go(func() {
		defer close(work)
		defer close(ordered)
		readErr = readChunks(ctx, rows, free, ordered, work)
	})
	var tamper error
	for c := range ordered {
		select {
		case <-c.done:
		case <-ctx.Done():
			continue // a worker may still hold c: neither read nor recycle it
		}
		if tamper == nil {
			if tamper = v.checkChunk(c); tamper != nil {
				cancel()
			}
		}
		select {
		case free <- c:
		default:
		}
	}
	cancel()
	wg.Wait()
	if tamper != nil {
		return tamper
	}
	if err := parent.Err(); err != nil {
		return fmt.Errorf("audit: verify: %w", err)
	}
	if readErr != nil {
		return fmt.Errorf("audit: verify: %w", readErr)
	}
	return nil
}

func (v *verifier) checkChunk(c *chunk) error {
	// Every problem found in the loop is reported at v.unsigned, the first
	// record not yet proven: a record is proven only once a valid signature
	// is reached through an intact chain.
	tamper := func(problem, format string, args ...any) error {
		return &TamperError{Seq: v.unsigned, Problem: problem, Detail: fmt.Sprintf(format, args...)}
	}
	for i := range c.n {
		r := &c.rows[i]
		if r.status == rowMalformed {
			return tamper(ProblemMalformed, "the record after seq %d does not decode", v.next-1)
		}
		seq := r.seq
		if seq != v.next {
			if seq > v.next {
				return tamper(ProblemMissing, "seq %d follows seq %d", seq, v.next-1)
			}
			return tamper(ProblemMalformed, "seq %d follows seq %d", seq, v.next-1)
		}
		if !bytes.Equal(c.field(r, colPrevHash), v.prev) {
			return tamper(ProblemChainBroken, "prev_hash of seq %d is not the hash of seq %d", seq, seq-1)
		}
		switch r.status {
		case rowHashBad:
			return tamper(ProblemHashMismatch, "seq %d does not hash to its stored hash", seq)
		case rowDigestBad:
			return tamper(ProblemArgsDigest, "seq %d: args_digest is not the digest of args", seq)
		case rowSigBad:
			return tamper(ProblemBadSignature, "the signature on seq %d, covering seq %d to %d, does not verify", seq, v.unsigned, seq)
		case rowSigned:
			v.rep.Signatures++
			v.rep.Verified = seq
			v.unsigned = seq + 1
		}
		v.prev = append(v.prev[:0], c.field(r, colHash)...)
		v.next = seq + 1
		v.rep.Records++
		v.rep.LastSeq = seq
	}
	v.rep.LastHash = string(v.prev)
	return nil
}

func (v *verifier) finish(h head, haveHead bool) error {
	last := v.rep.LastSeq
	if v.unsigned <= last {
		return &TamperError{Seq: v.unsigned, Problem: ProblemUnsigned,
			Detail: fmt.Sprintf("no signature covers seq %d to %d", v.unsigned, last)}
	}
	if !haveHead {
		return &TamperError{Seq: last + 1, Problem: ProblemHeadMissing}
	}
	v.rep.HeadSeq, v.rep.HeadHash = h.seq, h.hash
	if !verifyHead(v.pub, h.seq, h.hash, h.sig) {
		return &TamperError{Seq: last + 1, Problem: ProblemBadHead}
	}
	if h.seq > last {
		return &TamperError{Seq: last + 1, Problem: ProblemTruncated,
			Detail: fmt.Sprintf("the signed head names seq %d; the log ends at seq %d", h.seq, last)}
	}
	if h.seq < last {
		return &TamperError{Seq: h.seq + 1, Problem: ProblemHeadMismatch,
			Detail: fmt.Sprintf("records after the signed head (seq %d)", h.seq)}
	}
	if h.hash != v.rep.LastHash {
		return &TamperError{Seq: last + 1, Problem: ProblemHeadMismatch, Detail: "the signed head names another hash"}
	}
	return nil
}
