package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
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
// record that cannot be trusted: every record before it is covered by a
// valid signature through an intact chain. Problem is one of the Problem
// constants; Detail says more.
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
	rows, err := tx.QueryContext(ctx, `SELECT `+recordColumns+` FROM records ORDER BY seq`)
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
func (v *verifier) walk(ctx context.Context, rows *sql.Rows) error {
	ctx, cancel := context.WithCancel(ctx)
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
		}
		if tamper == nil && ctx.Err() == nil {
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
	if readErr != nil && !errors.Is(readErr, context.Canceled) {
		return fmt.Errorf("audit: verify: %w", readErr)
	}
	return ctx.Err()
}

func (v *verifier) checkChunk(c *chunk) error {
	for i := range c.n {
		r := &c.rows[i]
		seq := r.seq
		if seq != v.next {
			if seq > v.next {
				return &TamperError{Seq: v.next, Problem: ProblemMissing,
					Detail: fmt.Sprintf("seq %d follows seq %d", seq, v.next-1)}
			}
			return &TamperError{Seq: seq, Problem: ProblemMalformed, Detail: "seq out of range"}
		}
		if !bytes.Equal(c.field(r, colPrevHash), v.prev) {
			at := seq
			if v.unsigned < seq {
				at = v.unsigned // the records since the last signature lead nowhere signed
			}
			return &TamperError{Seq: at, Problem: ProblemChainBroken,
				Detail: fmt.Sprintf("prev_hash of seq %d is not the hash of seq %d", seq, seq-1)}
		}
		switch r.status {
		case rowHashBad:
			return &TamperError{Seq: seq, Problem: ProblemHashMismatch}
		case rowDigestBad:
			return &TamperError{Seq: seq, Problem: ProblemArgsDigest}
		case rowSigBad:
			return &TamperError{Seq: v.unsigned, Problem: ProblemBadSignature,
				Detail: fmt.Sprintf("signature on seq %d, covering seq %d to %d", seq, v.unsigned, seq)}
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
		return &TamperError{Seq: min(h.seq, last) + 1, Problem: ProblemBadHead}
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
		return &TamperError{Seq: last, Problem: ProblemHeadMismatch, Detail: "the signed head names another hash"}
	}
	return nil
}

// Column indexes into a scanned row's text fields; the first numHashed are
// the hashed fields in encoding order.
const (
	colPrevHash = numHashed - 1
	colArgs     = 10
	colDigest   = 11
	colHash     = numHashed
	colSig      = numHashed + 1
	numText     = numHashed + 2
)

const chunkRows = 2048

type rowStatus uint8

const (
	rowOK rowStatus = iota
	rowSigned
	rowHashBad
	rowDigestBad
	rowSigBad
)

type row struct {
	seq, ts int64
	off     [numText + 1]int // field i is arena[off[i]:off[i+1]]
	status  rowStatus
}

// chunk is a run of consecutive rows, hashed by one worker.
type chunk struct {
	rows  [chunkRows]row
	n     int
	arena []byte
	done  chan struct{}
}

func (c *chunk) field(r *row, i int) []byte { return c.arena[r.off[i]:r.off[i+1]] }

// check sets each row's status: whether it hashes to its stored hash, its
// digest matches its args, and its signature (if any) verifies.
func (c *chunk) check(pub ed25519.PublicKey) {
	var fields [numHashed][]byte
	var buf []byte
	var sum [sha256.Size]byte
	var hexSum [2 * sha256.Size]byte
	for i := range c.n {
		r := &c.rows[i]
		for j := range numHashed {
			fields[j] = c.field(r, j)
		}
		buf = hashInput(buf[:0], r.seq, r.ts, &fields)
		sum = sha256.Sum256(buf)
		hex.Encode(hexSum[:], sum[:])
		switch {
		case !bytes.Equal(hexSum[:], c.field(r, colHash)):
			r.status = rowHashBad
		case !digestMatches(fields[colArgs], fields[colDigest]):
			r.status = rowDigestBad
		case len(c.field(r, colSig)) > 0:
			sig := make([]byte, ed25519.SignatureSize)
			n, err := hex.Decode(sig, c.field(r, colSig))
			if err == nil && n == ed25519.SignatureSize && ed25519.Verify(pub, sum[:], sig) {
				r.status = rowSigned
			} else {
				r.status = rowSigBad
			}
		default:
			r.status = rowOK
		}
	}
}

func digestMatches(args, digest []byte) bool {
	if len(args) == 0 {
		return len(digest) == 0
	}
	sum := sha256.Sum256(args)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return bytes.Equal(h[:], digest)
}

// readChunks scans rows into chunks and hands each to the workers and, in
// order, to the checker.
func readChunks(ctx context.Context, rows *sql.Rows, free <-chan *chunk, ordered, work chan<- *chunk) error {
	var seq, ts int64
	var raw [numText]sql.RawBytes
	dest := make([]any, 0, numColumns)
	dest = append(dest, &seq, &ts)
	for i := range raw {
		dest = append(dest, &raw[i])
	}
	var c *chunk
	send := func() error {
		for _, ch := range []chan<- *chunk{ordered, work} {
			select {
			case ch <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		c = nil
		return nil
	}
	for rows.Next() {
		if c == nil {
			select {
			case c = <-free:
				c.n, c.arena = 0, c.arena[:0]
			default:
				c = &chunk{arena: make([]byte, 0, chunkRows*512)}
			}
			c.done = make(chan struct{})
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		r := &c.rows[c.n]
		r.seq, r.ts = seq, ts
		for i := range raw {
			r.off[i] = len(c.arena)
			c.arena = append(c.arena, raw[i]...)
		}
		r.off[numText] = len(c.arena)
		c.n++
		if c.n == chunkRows {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if c != nil {
		return send()
	}
	return nil
}
