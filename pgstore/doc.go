// Package pgstore is idem's production store on PostgreSQL, built on pgx v5
// (pgxpool). It implements [idem.Store] and [idem.Notifier].
//
// # Schema
//
// Records live in one table (default public.idem_records) whose primary key
// on (scope, key) decides every claim. The schema is a set of numbered
// migrations embedded in the binary: [Store.Migrate] applies the pending ones
// (safe when several processes start together), Config.Migrate applies them
// at construction, and [MigrationsSQL] prints them for teams that run their
// own migration tool (`idem migrate --print`).
//
// # Cost per request
//
// A first-time request is two statements (Claim, Finish); a duplicate is one
// statement that writes nothing: Claim reads the existing row and, in the
// same statement, runs INSERT … ON CONFLICT DO NOTHING RETURNING only when
// it saw none; never ON CONFLICT DO UPDATE (which would make every replay
// write a row version).
//
// # The snapshot trap
//
// When two transactions insert the same key at once, the second waits for
// the first; if the first commits, the second's INSERT … ON CONFLICT DO
// NOTHING does nothing, and the read in the same statement, which uses a
// snapshot taken before the winner committed, finds nothing either. Claim
// therefore repeats its statement until it returns a row (bounded, and
// stopping when ctx ends). Under READ COMMITTED each repetition has a fresh
// snapshot and sees the winner.
//
// # Transactions
//
// [Store.WithTx] (pgx) and [Store.WithSQLTx] (database/sql through pgx's
// stdlib driver) run the operations inside the caller's transaction, so a
// local write and its record commit together: exactly once for effects on
// the same database. The transaction must run at READ COMMITTED, the
// PostgreSQL default; at REPEATABLE READ or SERIALIZABLE a claim that meets a
// key committed after the transaction began fails with SQLSTATE 40001 and the
// whole transaction must be retried.
//
// # Notifications
//
// Finish, Release and Resolve call pg_notify, for records a waiter has
// flagged, on a channel derived from the schema and table, with a hash of
// (scope, key) as payload. One listener
// connection per Store, opened on the first [Store.Subscribe] and kept
// alive (reconnecting with backoff) until Close, fans notifications out to
// subscribers. Notifications sent inside a transaction are delivered at
// commit.
//
// # CockroachDB and YugabyteDB
//
// The operations use only INSERT … ON CONFLICT DO NOTHING, UPDATE/DELETE …
// RETURNING, data-modifying CTEs, row comparisons and = ANY(array), which
// both systems document as supported; statements that fail with a
// serialization error outside a caller's transaction are retried by Claim.
// Set Config.DisableNotify there (neither implements LISTEN/NOTIFY). The
// migrations use pg_advisory_xact_lock, pg_namespace, a partial index and
// COLLATE "C", which may need adapting. None of this has been tested against
// either system: only PostgreSQL 15 is tested here.
//
// # Decisions
//
// Notifications are switched off with Config.DisableNotify rather than on
// with a field defaulting to true, so that the zero Config is the
// recommended one. Outcomes notify only records a waiter flagged (see
// [Store.Subscribe]): NOTIFY holds a database-wide lock through commit, and
// paying it on every outcome cut first-time throughput at 16 clients to
// about a quarter. Resolve with Release returns a nil record (the row is
// gone). Sweep with a Limit of 0 or less removes every expired record in
// one statement.
package pgstore
