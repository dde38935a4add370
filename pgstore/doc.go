// Package pgstore is idem's production store on PostgreSQL, built on pgx v5
// (pgxpool). It implements [idem.Store] and [idem.Notifier].
//
// # Schema
//
// Records live in one table (default public.idem_records) whose primary key
// on (scope, key) decides every claim. The schema is a set of numbered
// migrations embedded in the binary: [Store.Migrate] applies the pending ones
// (safe when several processes start together), Config.Migrate applies them
// at construction, and [MigrationsScript] prints them for teams that run their
// own migration tool (`idem migrate --print`).
//
// # Cost per request
//
// A duplicate is one statement that writes nothing; a first-time request
// is two (the claim, then Finish). The claim statement is a CTE that reads
// the existing row and, only when it sees none, runs INSERT … ON CONFLICT
// DO NOTHING RETURNING; never ON CONFLICT DO UPDATE (which would make every
// replay write a row version). That CTE costs the server noticeably more
// than a plain SELECT even when it inserts nothing, so Claim watches the
// recent mix: while most claims find an existing record it sends a plain
// SELECT by primary key first (a replay then costs exactly what a
// hand-written lookup costs) and runs the CTE only on a miss; while most
// are first-time it runs the CTE straight away. The SELECT never decides a
// claim: the primary key does, in the CTE. Finish, given the caller's claim
// (as the engine passes it), is one UPDATE fenced on the fence, the attempt
// and the state that also requires the columns it does not write to hold
// the claim's values; it returns only whether it woke waiters (nothing when
// notifications are disabled), and the store builds the finished record.
//
// # Group commit
//
// Group commit is on by default: the zero Config runs the eager group
// commit (Batch.Eager, no window) of claims and outcomes, as the idem CLI
// does; Config.Unbatched turns it off. At 16 and 64 callers behind
// net/http it measured 1.13–1.76× the closest peer (idemlease), no
// batching 0.83–0.97×; at one caller a write goes out alone either way
// (docs/performance.md). Claims that arrive within Batch.Window (up to
// Batch.MaxSize) — or, eager, the claims that queued while earlier
// batches were being written — are gathered into one batch and written
// in transactions
// of at most four, each sent as one pipelined round trip: the statements
// in (scope, key) order (so concurrent transactions, from any process,
// lock rows in one order and cannot deadlock each other) and one Sync, at
// which PostgreSQL commits them as one implicit transaction.
// Up to four transactions are in flight at once. Eager (the default),
// the callers write the batches themselves:
// a write that finds nothing being written or waiting is sent on its own,
// as without batching; one that finds fewer than four batches in flight
// writes itself and the writes waiting in line; the others wait in line,
// and a caller that has written its batch hands the next one to a
// waiting caller. A caller may so wait for the others in its batch, up to
// the latest deadline among them. Outcomes (Finish) join
// the batches by default, and under a Batch with a window or Eager set
// only with Config.BatchFinishes; otherwise each is its own statement.
// The limit of four
// keeps the outcome UPDATE mostly HOT: rows claimed together share a heap
// page, and one transaction finishing many of them, or claiming more than
// the page's free tenth can later hold finished, leaves the new versions
// no room there (docs/performance.md measured 47 % HOT for one
// transaction of 32 writes, claims and outcomes; 97–99 % with only claims
// batched, 92–97 % with outcomes too). Nothing about a statement changes: the primary key decides
// claims, the fence decides outcomes, and a conflict answers rather than
// fails, so one caller's conflict never affects another. Callers are
// answered only after COMMIT is confirmed, so a claim is durable before
// its effect runs. If a statement does fail, PostgreSQL skips the rest of
// the pipeline, COMMIT included; the batch is rolled back and each request
// is run again on its own, so only the failing caller sees an error. If
// COMMIT itself fails, every caller in the batch gets the error (the
// engine treats it as the store being unavailable; a retry recognises its
// own attempt). Replays are read outside batches, except while recent
// claims were mostly first-time (see above), when a duplicate may ride in
// a batch and wait up to one window for its answer. Operations in a
// caller's transaction ([Store.WithTx]) are never batched.
//
// # Outcomes without the flush wait
//
// A first-time request waits for two WAL flushes: the claim's, which must
// reach disk before the effect runs, and the outcome's. Config.AsyncOutcomes
// (an opt-in; CLI async_outcomes=true) drops the second wait: each Finish
// outside a caller's transaction commits with synchronous_commit off for
// its own transaction, and outcomes leave the group commit so that no
// claim shares a relaxed commit. The next durable commit on the server
// (the next claim) or the WAL writer makes the outcome durable shortly
// after. A server crash in between loses it: the record comes back
// in_progress, and once its lease has run out a retry answers unknown, for
// reconciliation — never a second effect (TestAsyncOutcomesCrash kills a
// server of its own to show both). At one caller behind net/http it
// measured 1.16–1.68× idemlease and 1.04–1.32× a hand-written INSERT +
// UPDATE waiting for both flushes; from 16 callers the default group
// commit shares the outcomes' flushes already, and the option gains
// little or loses (docs/performance.md, "One caller on PostgreSQL").
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
// # Replication and failover
//
// A claim decides a key only while its row survives. An asynchronous
// standby promoted after the primary died lacks the claims it had not
// received, and every retry that follows claims its key afresh and runs
// the effect again. [Store.CheckReplication] (an [idem.ReplicationChecker],
// asked by idem.New and idem doctor) reads pg_stat_replication,
// synchronous_standby_names and synchronous_commit as the store's sessions
// see them, and refuses a standby, read-only sessions, and standbys that
// claims do not wait for; it warns about remote_write, asynchronous
// standbys beside synchronous ones, quorum commit, no synchronous standby
// connected, and standbys the role may not see (pg_monitor).
//
// Config.ReplicatedClaims makes each claim durable on the synchronous
// standbys before its effect runs: the claim's statement sets
// synchronous_commit for its own transaction (set_config with is_local,
// SET LOCAL in the same statement: no extra round trip; PostgreSQL reads
// the setting at commit), so outcome writes keep the server's level. The
// claims of a group-commit batch make the batch's COMMIT wait; a take-over
// of an expired record and a re-drive wait as well. A commit whose wait for
// the standbys was cut short has committed on the primary alone, and
// PostgreSQL then reports success with only a WARNING ("canceling wait for
// synchronous replication"): pgstore watches for that warning on the
// claim's connection (see [ConfigurePool]), bounds the wait by
// Config.ReplicatedClaimTimeout and ctx, and fails the claim closed with
// [ErrNotReplicated] (idem.ErrStoreUnavailable) — its effect does not run.
// The engine retries such a claim with the same attempt id and finds its
// own row; before reporting it claimed, the store rewrites the row
// unchanged in a transaction at the claim's level, so the row is on the
// standbys first (a transaction that writes nothing commits without
// waiting). In a caller's transaction ([Store.WithTx]) the claim sets the
// level for that transaction, and the caller's COMMIT waits.
//
// Point the store at every candidate primary with a multi-host DSN and
// target_session_attrs=read-write
// (postgres://u@a:5432,b:5432/db?target_session_attrs=read-write): after a
// failover the pool's new connections go to the promoted server, without
// a restart.
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
// both systems document as supported (the bounded sweep also finds its
// rows by ctid, which they do not have); statements that fail with a
// serialization error outside a caller's transaction are retried by Claim.
// Set Config.DisableNotify there (neither implements LISTEN/NOTIFY; in the
// idem CLI, add notify=false to the postgres:// DSN), and consider
// Config.Unbatched (batch=0): the default group commit sends several
// statements and one Sync in a pipeline and counts on the server
// committing them as one implicit transaction at the Sync, or none of
// them when one fails. The
// migrations use pg_advisory_xact_lock, pg_namespace, a partial index and
// COLLATE "C", which may need adapting. None of this has been tested against
// either system: only PostgreSQL 15 is tested here.
//
// # Indexes and HOT updates
//
// Recording an outcome is a HOT update: PostgreSQL writes the new version
// of the row on its page and adds no index entries, because no index
// mentions a column a finish writes (state, result, completed_at,
// expires_at, waiting). Besides the primary key there are two indexes
// (migration 0002, kept by 0003): created_at, which serves List's order
// and cursor, `idem list --older-than` and the sweep, and created_at over the records
// whose stored column is_unknown (computed from state, false before and
// after a first-time finish) is true, for `idem list --state unknown`. The
// table's fillfactor is 90, which leaves the finished row room on its
// page. The sweep therefore walks records oldest first and deletes the
// expired ones, bounded by the shortest retention the store has recorded
// (see [Store.Sweep]). docs/performance.md shows the plans on a table of a
// million records and the HOT share `idem bench` measures.
//
// # Row layout
//
// A record with a 200-byte result takes about 480 bytes, heap and indexes
// (migration 0003): the fixed-width columns come first, so none waits for
// alignment behind a variable-length one; state is a one-byte "char" code
// (p, s, f, u); attempt_id is bytea, an engine attempt id (32 lower-case
// hex digits) kept as its 16 bytes behind the tag byte 1 and any other id
// as its bytes behind the tag byte 2; and recording a terminal outcome
// clears lease_until. Tools that read the table directly must decode
// state and attempt_id the same way; `idem get` and `idem list` do.
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
