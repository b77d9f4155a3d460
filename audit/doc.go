// Package audit is Babelagent's tamper-evident, append-only audit log: the
// record of every action the kernel takes, on whose behalf, who approved it
// and how it ended, kept so that a run can be replayed and so that any later
// edit, deletion, insertion, reordering or truncation of the log is
// detected.
//
// The log is its own SQLite file (WAL, synchronous=FULL, mode 0600),
// written only by a [Writer]. Each record is hash-chained to the one before
// it (see [Record] for the exact encoding) and every commit is signed with an
// ed25519 key that must live outside the log's directory, so that whoever
// can rewrite the log cannot also re-sign it; [Verify] needs only the public
// key. [Writer.Append] returns only once its record is durable; if it
// returns an error, the caller must not perform the action it was recording
// (write-ahead, fail closed). [Export] writes JSON Lines for a SIEM and
// [Replay] returns one run's trajectory.
//
// This package must never record a secret's value (only its name), never
// redact on the caller's behalf (the caller hands in already-redacted
// arguments), never update or delete a record it has written, and never
// keep its signing key next to the log. Triggers make an accidental UPDATE
// or DELETE fail, but they are not the defence: anyone who can write the
// file can drop them. The defence is that Verify notices.
//
// # Signature granularity
//
// The writer commits records in batches (group commit) and signs, per
// batch, the hash of the batch's last record. Because each record's hash
// covers the previous record's hash, that one signature covers every record
// up to it. Verify therefore checks a SHA-256 hash per record and one
// ed25519 signature per batch, which is what lets it check a million
// records in about two seconds on two cores; a signature per record would
// take far longer, for no added guarantee. Only the last record of a batch
// carries a Sig; a record appended with no other Append in flight is always
// the last of its batch. When Verify finds a problem inside a batch of
// several records, the seq it reports is the batch's first record (from
// there on nothing is proven), and its detail names the record where the
// problem was found.
//
// # Head anchoring and what Verify detects
//
// Each batch also rewrites a one-row head table, in the same transaction:
// the last seq and hash, signed under a separate domain so that a record's
// batch signature cannot stand in for it. With the private key held only by
// the Writer, Verify detects: an edited record (its fields no longer hash to
// its hash); an edit hidden by recomputing every later hash (the chain then
// meets a signature that does not verify); a deleted record (a gap in seq);
// an inserted or reordered record (a broken chain or a bad hash); records
// added by anyone but the writer (no signature covers them, or they lie
// beyond the signed head); truncation of the tail (the signed head names a
// later record than the log holds); and a removed or altered head.
//
// Verify cannot detect on its own a rollback of the whole file to an
// earlier copy, or a truncation back to a head that an attacker copied out
// of an earlier state of the file: both leave a log the writer really did
// sign. Recording [VerifyReport.HeadSeq] and [VerifyReport.HeadHash]
// somewhere off the host, and checking that later reports extend them,
// closes that gap.
package audit
