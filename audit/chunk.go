package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"strings"
)

// packedQuery reads each record as one value: its columns in recordColumns
// order, joined by the byte 0xFF. Reading one column instead of 24 is most
// of what makes Verify fast. The packing is unambiguous because no field the
// writer stores can hold 0xFF (every field is valid UTF-8, where 0xFF never
// occurs): a row whose value does not split into exactly numColumns parts
// has been tampered with. concat, unlike concat_ws, keeps every separator
// even where a NULL was slipped into a column, so fields cannot shift.
func packedQuery() string {
	var b strings.Builder
	b.WriteString("SELECT concat(")
	for i, col := range strings.Split(recordColumns, ",") {
		if i > 0 {
			b.WriteString(", x'FF', ")
		}
		b.WriteString(strings.TrimSpace(col))
	}
	b.WriteString(") FROM records ORDER BY seq")
	return b.String()
}

const packSep = 0xFF

// Field indexes into a row's text fields (the columns after seq and ts);
// the first numHashed are the hashed fields in encoding order.
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
	rowMalformed
	rowHashBad
	rowDigestBad
	rowSigBad
)

type row struct {
	start, end int // the packed value is arena[start:end]
	seq, ts    int64
	off        [numText + 1]int // field i is arena[off[i]:off[i+1]-1] (without its separator)
	status     rowStatus
}

// chunk is a run of consecutive rows, unpacked and hashed by one worker.
type chunk struct {
	rows  [chunkRows]row
	n     int
	arena []byte
	done  chan struct{}
}

func (c *chunk) field(r *row, i int) []byte { return c.arena[r.off[i] : r.off[i+1]-1] }

// unpack splits r's packed value into seq, ts and the text fields.
func (c *chunk) unpack(r *row) bool {
	b := c.arena[r.start:r.end]
	var parts [numColumns]int // end offsets (exclusive) of each part within b
	n := 0
	for i, ch := range b {
		if ch == packSep {
			if n == numColumns-1 {
				return false
			}
			parts[n] = i
			n++
		}
	}
	if n != numColumns-1 {
		return false
	}
	parts[n] = len(b)
	var ok1, ok2 bool
	r.seq, ok1 = parseInt(b[:parts[0]])
	r.ts, ok2 = parseInt(b[parts[0]+1 : parts[1]])
	if !ok1 || !ok2 {
		return false
	}
	// off[i] is where text field i starts; off[i+1]-1 is where it ends, so
	// the last one needs a virtual separator just past the end.
	for i := range numText {
		r.off[i] = r.start + parts[i+1] + 1
	}
	r.off[numText] = r.end + 1
	return true
}

// parseInt parses a decimal int64 as SQLite prints one.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	if v > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// check unpacks each row and sets its status: whether it hashes to its
// stored hash, its digest matches its args, and its signature (if any)
// verifies.
func (c *chunk) check(pub ed25519.PublicKey) {
	var fields [numHashed][]byte
	var buf []byte
	var sum [sha256.Size]byte
	var hexSum [2 * sha256.Size]byte
	sig := make([]byte, ed25519.SignatureSize)
	for i := range c.n {
		r := &c.rows[i]
		if !c.unpack(r) {
			r.status = rowMalformed
			continue
		}
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
			if s := c.field(r, colSig); hex.DecodedLen(len(s)) == ed25519.SignatureSize {
				if _, err := hex.Decode(sig, s); err == nil && ed25519.Verify(pub, sum[:], sig) {
					r.status = rowSigned
					continue
				}
			}
			r.status = rowSigBad
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
	var packed sql.RawBytes
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
		if err := rows.Scan(&packed); err != nil {
			return err
		}
		r := &c.rows[c.n]
		r.start = len(c.arena)
		c.arena = append(c.arena, packed...)
		r.end = len(c.arena)
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
