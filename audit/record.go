package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Kinds of record the kernel writes. Kind is free text, so a component may
// add its own, but these are the ones every tool reads.
const (
	KindNodeIntent        = "node.intent"
	KindNodeOutcome       = "node.outcome"
	KindApprovalRequested = "approval.requested"
	KindApprovalDecided   = "approval.decided"
	KindPolicyChanged     = "policy.changed"
	KindConfigChanged     = "config.changed"
	KindSecretUsed        = "secret.used"
	KindKill              = "kill"
	KindAuditDisabled     = "audit.disabled"
	KindRunStarted        = "run.started"
	KindRunFinished       = "run.finished"
)

// GenesisHash is the PrevHash of the first record in a log.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Limits on what one record may hold. A record over maxRecordBytes is
// refused (and so is the action it records); an Error longer than
// maxErrorBytes is cut short, because losing an outcome record over a long
// error message would be worse than losing the end of the message.
const (
	maxRecordBytes = 1 << 20
	maxErrorBytes  = 1024
	maxKindBytes   = 64
	maxSecretName  = 128
)

// Record is one entry in the audit log.
//
// The caller fills in what happened (Kind through Error); the writer sets
// Seq, TS, PrevHash, Hash and Sig, and derives ArgsDigest from Args.
//
// Hash is the lowercase hex SHA-256 of this byte string, where be64 is a
// big-endian 8-byte integer and str(s) is be32(len(s)) followed by the bytes
// of s:
//
//	"babel.audit.record.v1\x00" be64(Seq) be64(TS as Unix nanoseconds)
//	str(Kind) str(RunID) str(RootRunID) str(ParentRunID) str(TraceID)
//	str(SpanID) str(Principal) str(Agent) str(Node) str(Adapter) str(Args)
//	str(ArgsDigest) str(Decision) str(Approver) str(ApprovalDigest)
//	str(Secret) str(Status) str(ResultDigest) str(Error) str(PrevHash)
//
// PrevHash is the previous record's Hash ([GenesisHash] for the first). Sig,
// set only on the last record of each committed batch, is the hex ed25519
// signature of the 32 raw bytes of Hash.
type Record struct {
	TS          time.Time `json:"ts"`
	Seq         int64     `json:"seq"`
	Kind        string    `json:"kind"`
	RunID       string    `json:"run_id"`
	RootRunID   string    `json:"root_run_id"`
	ParentRunID string    `json:"parent_run_id"` // the delegating run, for a sub-agent's run
	TraceID     string    `json:"trace_id"`
	SpanID      string    `json:"span_id"`
	Principal   string    `json:"principal"` // on whose behalf
	Agent       string    `json:"agent"`     // which agent acted
	Node        string    `json:"node"`
	Adapter     string    `json:"adapter"`
	// Args is the call's arguments as JSON, already redacted by the caller.
	// The writer stores it in canonical form (see [Canonical]).
	Args json.RawMessage `json:"args,omitempty"`
	// ArgsDigest is Digest(Args) ("" when Args is empty). The writer sets it;
	// a caller that sets it to anything else gets an error.
	ArgsDigest     string `json:"args_digest"`
	Decision       string `json:"decision"`
	Approver       string `json:"approver"`
	ApprovalDigest string `json:"approval_digest"`
	// Secret is the name of a secret used, never its value.
	Secret       string `json:"secret"`
	Status       string `json:"status"`
	ResultDigest string `json:"result_digest"`
	Error        string `json:"error"`
	PrevHash     string `json:"prev_hash"`
	Hash         string `json:"hash"`
	Sig          string `json:"sig,omitempty"`
}

// FieldError says a record handed to Append is malformed; nothing was
// written.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("audit: record field %s: %s", e.Field, e.Reason)
}

// prepare returns a copy of r ready for the writer: validated, strings made
// valid UTF-8, Args canonical and ArgsDigest set. The writer-owned fields are
// cleared.
func prepare(r *Record) (Record, error) {
	if r == nil {
		return Record{}, errors.New("audit: nil record")
	}
	c := *r
	c.Seq, c.TS, c.PrevHash, c.Hash, c.Sig = 0, time.Time{}, "", "", ""
	for _, f := range c.stringFields() {
		if !utf8.ValidString(*f) {
			*f = strings.ToValidUTF8(*f, "\uFFFD")
		}
	}
	if c.Kind == "" {
		return Record{}, &FieldError{"kind", "is empty"}
	}
	if len(c.Kind) > maxKindBytes {
		return Record{}, &FieldError{"kind", fmt.Sprintf("is longer than %d bytes", maxKindBytes)}
	}
	if c.Secret != "" && !isSecretName(c.Secret) {
		return Record{}, &FieldError{"secret", "must be a secret's name (letters, digits, _ . - : /, at most 128 bytes), never its value"}
	}
	if len(c.Error) > maxErrorBytes {
		c.Error = truncateUTF8(c.Error, maxErrorBytes-len("…")) + "…"
	}
	digest := ""
	if len(c.Args) > 0 {
		args, err := canonicalJSON(c.Args)
		if err != nil {
			return Record{}, &FieldError{"args", "not canonicalizable JSON: " + err.Error()}
		}
		c.Args = args
		digest = Digest(args)
	} else {
		c.Args = nil
	}
	if c.ArgsDigest != "" && c.ArgsDigest != digest {
		return Record{}, &FieldError{"args_digest", "does not match the digest of args"}
	}
	c.ArgsDigest = digest
	if c.size() > maxRecordBytes {
		return Record{}, &FieldError{"record", fmt.Sprintf("is larger than %d bytes", maxRecordBytes)}
	}
	return c, nil
}

// stringFields lists the caller-supplied string fields.
func (r *Record) stringFields() []*string {
	return []*string{&r.Kind, &r.RunID, &r.RootRunID, &r.ParentRunID, &r.TraceID, &r.SpanID,
		&r.Principal, &r.Agent, &r.Node, &r.Adapter, &r.Decision, &r.Approver,
		&r.ApprovalDigest, &r.Secret, &r.Status, &r.ResultDigest, &r.Error}
}

func (r *Record) size() int {
	n := len(r.Args)
	for _, f := range r.stringFields() {
		n += len(*f)
	}
	return n
}

func isSecretName(s string) bool {
	if len(s) > maxSecretName {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '.', c == '-', c == ':', c == '/':
		default:
			return false
		}
	}
	return true
}

func truncateUTF8(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

const recordDomain = "babel.audit.record.v1\x00"

// hashInput appends the encoding documented on Record to buf, from fields
// given as byte slices (how Verify reads them).
func hashInput(buf []byte, seq, tsNanos int64, fields *[numHashed][]byte) []byte {
	buf = appendHashPrefix(buf, seq, tsNanos)
	for _, f := range fields {
		buf = appendHashField(buf, f)
	}
	return buf
}

// numHashed is the number of string fields in the hash, PrevHash included.
const numHashed = 20

func appendHashPrefix(buf []byte, seq, tsNanos int64) []byte {
	buf = append(buf, recordDomain...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(seq))
	return binary.BigEndian.AppendUint64(buf, uint64(tsNanos))
}

func appendHashField[T string | []byte](buf []byte, f T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(f)))
	return append(buf, f...)
}

// appendHash appends r's hash input to buf, in the same encoding as
// hashInput.
func (r *Record) appendHash(buf []byte) []byte {
	buf = appendHashPrefix(buf, r.Seq, r.TS.UnixNano())
	for _, f := range []string{r.Kind, r.RunID, r.RootRunID, r.ParentRunID, r.TraceID, r.SpanID,
		r.Principal, r.Agent, r.Node, r.Adapter} {
		buf = appendHashField(buf, f)
	}
	buf = appendHashField(buf, []byte(r.Args))
	for _, f := range []string{r.ArgsDigest, r.Decision, r.Approver, r.ApprovalDigest, r.Secret,
		r.Status, r.ResultDigest, r.Error, r.PrevHash} {
		buf = appendHashField(buf, f)
	}
	return buf
}

// ComputeHash returns the hash r should carry, from its fields as they are.
func (r *Record) ComputeHash() string {
	sum := sha256.Sum256(r.appendHash(make([]byte, 0, 512+len(r.Args)+len(r.Error))))
	return hex.EncodeToString(sum[:])
}
