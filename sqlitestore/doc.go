// Package sqlitestore is idem's embedded default store: a SQLite database
// file driven by the pure-Go modernc.org/sqlite driver (no cgo, no service).
//
// # Layout
//
// The database runs in WAL mode with exactly one writer connection and a
// small pool of read-only readers. SQLite admits one writer at a time, so a
// pool of writers would only queue on the file lock (with p99 latencies in
// seconds under load); one writer connection queues in Go instead, and
// readers never wait for it. Every write transaction starts with BEGIN
// IMMEDIATE and every connection has a busy timeout, so several processes
// (or several [Store] values) may share one file safely.
//
// With Synchronous "FULL" (the default) each commit is an fsync: a claim is
// durable before the effect runs. A first-time request costs two commits
// (claim, finish); a replay costs one read on a reader connection and no
// write at all.
//
// # Schema
//
// The schema is a set of numbered migrations embedded in the binary, applied
// by [Store.Migrate] (or [Config].Migrate) and printable with
// [MigrationsSQL]. Table idem_records has PRIMARY KEY (scope, key): that
// constraint, not a prior read, decides which claim wins.
//
// # Transactions
//
// [Store.WithTx] returns a store whose operations run inside a caller's
// transaction on the writer ([Store.DB]), so a local write and its record
// commit or roll back together: exactly-once for local effects.
//
// # Decisions where the contract is silent
//
//   - Claim refuses an empty AttemptID (a retried claim could not recognise
//     its own row) and an invalid key ([idem.ErrInvalidKey]); both are
//     caller errors, not [idem.ErrStoreUnavailable].
//   - Claim is up to three single statements on the writer (INSERT … ON
//     CONFLICT DO NOTHING RETURNING; a conditional UPDATE of an expired
//     terminal row; a read), each atomic on its own, repeated in a bounded
//     loop if the row changes between them. No transaction is needed: the
//     primary key decides every insert.
//   - Finish of an absent record returns [idem.ErrFenced] (the record was
//     released or swept: the attempt no longer holds anything).
//   - Resolve with Release returns the deleted record.
//   - Sweep with Limit <= 0 deletes every expired record in one statement.
//   - Hot statements are prepared once per connection; a [TxStore] runs
//     unprepared statements on the caller's transaction and, having to see
//     its own uncommitted rows, skips the reader replay check.
package sqlitestore
