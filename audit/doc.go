// Package audit is Babelagent's tamper-evident, append-only audit log: the
// record of every action the kernel takes, who asked for it, who approved it
// and how it ended, kept so that it can be replayed and so that any later
// edit, deletion, insertion, reordering or truncation of it is detected.
//
// The log is its own SQLite file, written only by a [Writer]. Each record is
// hash-chained to the one before it (see [Record] for the exact encoding) and
// every commit is signed with an ed25519 key that lives outside the log's
// directory, so [Verify] needs only the public key. [Writer.Append] returns
// only once its record is durable; if it returns an error the caller must
// not perform the action it was recording (write-ahead, fail closed).
//
// This package must never record a secret's value (only its name), never
// redact on the caller's behalf (the caller hands in already-redacted
// arguments), never update or delete a record it has written, and never
// keep its signing key next to the log.
//
// # What Verify detects
//
// With a [Writer] holding the only copy of the private key, [Verify] detects:
// an edited record (its hash no longer matches its fields); a record whose
// hash was recomputed to hide an edit (the chain then meets a signature that
// no longer verifies); a deleted record (a gap in seq, or a broken chain); an
// inserted or reordered record (a broken chain or a bad hash); records
// appended by anyone but the writer (not covered by a signature, or beyond
// the signed head); and truncation of the tail (the signed head names a
// later record than the log holds). It cannot detect, on its own, a rollback
// of the whole file to an earlier copy, or a truncation back to a head that
// an attacker saved from an earlier state of the file: both leave a log that
// the writer really did sign. Recording [VerifyReport.Head] somewhere off
// the host, and comparing later, closes that gap.
//
// # Signature granularity
//
// The writer commits records in batches (group commit) and signs the hash of
// the last record of each batch, and a head row naming that record. Because
// each record's hash covers the previous record's hash, one signature covers
// every record up to it, so Verify checks one ed25519 signature per batch
// and a SHA-256 hash per record. Only the last record of a batch carries a
// Sig; a record written on its own (no concurrent appends) is always the
// last of its batch.
package audit
