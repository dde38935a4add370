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
// write at all. The store follows its recent claims (storekit/claimmix):
// while duplicates dominate, a claim first probes a reader, so a replay
// never queues for the writer; while first-time claims dominate, the probe
// would only miss, so a claim goes straight to the writer, where a
// duplicate is found by the primary key and still writes nothing.
//
// With "NORMAL" (Config.Synchronous, or sync=normal in an idem DSN) commits
// are not fsynced one by one: much faster, but a power cut may lose the
// last acknowledged commits, and with them a claim whose effect already
// ran; a retry would then run the effect again. Use it only where that
// risk is acceptable.
//
// # Group commit
//
// One fsync per commit caps a FULL store at a few thousand commits a
// second. With Config.Batch set, the claims and outcomes that arrive
// within Batch.Window (up to Batch.MaxSize) are handed to one writer
// goroutine that runs them in a single BEGIN IMMEDIATE … COMMIT: one fsync
// for the whole batch. Each request runs exactly the statements it would
// run alone (the primary key decides every claim) inside its own
// SAVEPOINT, so a failing statement is rolled back to it and fails only
// its own caller. Callers are answered after COMMIT returns; if COMMIT
// fails, every caller in the batch gets the error and none was
// acknowledged. Replays probed on the readers (above) never wait
// for a batch; a store from [Store.WithTx] is never batched. With
// Batch.Eager there is no window: a write that finds nothing queued, no
// batch being written and no other write gone alone runs as it would with
// group commit off, and the writes that queue behind it share the next
// commit (the idem CLI's default).
//
// # Schema
//
// The schema is a set of numbered migrations embedded in the binary, applied
// by [Store.Migrate] (or [Config].Migrate) and printable with
// [MigrationsScript]. Table idem_records has PRIMARY KEY (scope, key): that
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
//     CONFLICT DO NOTHING; a conditional UPDATE of an expired
//     terminal row; a read), each atomic on its own, repeated in a bounded
//     loop if the row changes between them. No transaction is needed: the
//     primary key decides every insert.
//   - Finish given the caller's claim (as the engine passes it) is one
//     plain UPDATE, fenced on the fence, the attempt and the state, that
//     also requires the columns it does not write to hold the claim's
//     values; the store builds the finished record instead of reading it
//     back with RETURNING. Without a usable claim, or when that UPDATE
//     changes nothing, a conditional UPDATE … RETURNING decides.
//   - Finish of an absent record returns [idem.ErrFenced] (the record was
//     released or swept: the attempt no longer holds anything).
//   - Resolve with Release returns the deleted record.
//   - Sweep with Limit <= 0 deletes every expired record in one statement.
//   - Hot statements are prepared once per connection; a store from
//     [Store.WithTx] runs unprepared statements on the caller's transaction
//     and, having to see its own uncommitted rows, skips the reader replay
//     check.
package sqlitestore
