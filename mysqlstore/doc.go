// Package mysqlstore is an [idem.Store] on MySQL 8 or MariaDB 10.5+ (InnoDB),
// through database/sql and github.com/go-sql-driver/mysql.
//
//	st, err := mysqlstore.Open(ctx, "app@tcp(db:3306)/app", mysqlstore.Config{Migrate: true})
//
// # Schema
//
// One table (Config.Table, "idem_records" by default) with PRIMARY KEY
// (scope, key): the unique constraint that decides every claim. Scope, key
// and attempt id are VARBINARY(255), so comparison is exact and
// case-sensitive whatever the server's collation; longer values are refused
// before they reach the server, because MySQL outside strict mode would
// truncate them and merge two intents. Secondary indexes serve List
// (state, created_at) and Sweep (expires_at). The schema is a set of
// numbered, embedded migrations recorded in Table+"_migrations"; apply them
// with [Store.Migrate], Config.Migrate, or the script from [MigrationsScript].
//
// Times are BIGINT microseconds since the Unix epoch, UTC, and NULL for the
// zero time. This is independent of the DSN's parseTime and loc and of the
// session time zone, and keeps the microsecond precision the store contract
// asks for. Records read back carry UTC times.
//
// # Claims
//
// A claim is a plain INSERT decided by the primary key. A first claim costs
// one statement; a duplicate fails with error 1062, writes nothing, and is
// followed by a read of the existing record (two round trips, no write). An
// expired succeeded/failed record is taken over by one conditional UPDATE
// (state, expiry and the fence that was read, checked in the statement) that
// bumps the fence. The claim loops, boundedly, until it returns a record:
// when the row disappears between the INSERT and the read, it starts again.
//
// Claim adapts to the recent mix (outside a transaction): when most recent
// claims found an existing record, it reads by primary key first, so a
// replay costs one SELECT, the same as a raw read; the read decides
// nothing, and an absent or expired record goes on to the INSERT above.
// When most recent claims were first-time, it inserts first, so a first
// claim costs one INSERT. The switch needs a couple of dozen claims.
//
// Finish with the caller's claim in hand (FinishParams.Claim, which the
// engine passes) and a terminal outcome is one UPDATE, the statement a
// bare driver would send with more conditions: fenced on fence, attempt
// and state, and requiring fingerprint, intent, mark, created_at and
// lease_until to hold the claim's values. The state always changes, so a
// changed row means the record is the claim with the written fields over
// it, and nothing is read back. When it changes nothing (already finished,
// fenced, absent, or moved on by a heartbeat or a mark), the general path
// below decides.
//
// Every UPDATE that names its row by the whole primary key says USE INDEX
// (PRIMARY). The one-UPDATE Finish also checks state and created_at, and
// without the hint MariaDB's range optimizer estimates state_created_at
// (an index dive per state in the IN list) on every finish before it
// picks the primary key anyway; with it, the optimizer analyses only the
// primary key, as for a bare UPDATE … WHERE scope = ? AND key = ?. The
// hint changes the access path, never which rows match.
//
// Otherwise, outcome writes (Finish, Resolve) read the record, decide, and
// write with an UPDATE conditioned on the fence, attempt and state. On a
// store made by [Open], Finish sends the read, the conditioned UPDATE and
// SELECT ROW_COUNT() as one multi-statement batch (one round trip); a pool
// given to [New] (whose DSN may not allow several statements per query) and
// WithTx use two round trips. Release, Heartbeat and SetMark write first
// and read only when nothing matched. MySQL reports changed rows, not
// matched rows (unless the DSN sets clientFoundRows), so "nothing changed"
// is always settled by a read, never taken as "fenced". Statements that
// lose a deadlock outside a transaction are retried.
//
// # Connections
//
// [Open] sets interpolateParams (one round trip per statement, no server
// prepares) and multiStatements (the general Finish batch; every value is
// still escaped by the driver), and caps the pool at [Config].MaxOpenConns (32
// by default), so a burst of callers (10,000 waiters on one key, say) waits
// in the pool instead of failing with "Error 1040: Too many connections".
//
// # Performance
//
// A first-time request through the engine sends exactly what the raw
// driver does: one autocommit INSERT and one autocommit UPDATE (server
// counters per request: Com_insert 1, Com_update 1, Com_select 0,
// Handler_commit 2, no explicit transaction, no row lock waits, the same
// fsyncs per request as raw). A replay is one SELECT by primary key, as raw.
// Measured per request at 16 clients on a shared 2-core VM (MariaDB 10.11,
// innodb_flush_log_at_trx_commit=1), CPU of the server process and of the
// client process:
//
//	first-time                       server µs   client µs
//	raw INSERT + UPDATE              205–280     65–98
//	engine, multi-statement Finish   440–525     210–257
//	engine, one-UPDATE Finish        250–290     93–116
//
// The multi-statement batch cost ~165 µs of server CPU and ~85 µs of client
// CPU more than a lone UPDATE: on a CPU-bound box that is throughput. With
// the one-UPDATE Finish, `idem bench --concurrency 16,64 --duration 2s`
// gave first-time idem/raw medians of 0.95 (c=16, single runs 0.46–1.07)
// and 0.64 (c=64, single runs 0.59–1.24) over nine runs at load average
// 10–18; before, 0.43–0.48 and 0.45–0.61. Replays stayed about even (one
// SELECT each side; single runs 0.68–1.35). What is left is client CPU in
// the engine (~20 µs a request), longer statement text, and whatever makes
// c=64 worse than c=16, not yet found.
//
// # Transactions
//
// [Store.WithTx] binds the store to the caller's *sql.Tx, so a local effect
// and its record commit together; its documentation explains the locking
// reads that make this correct under REPEATABLE READ.
//
// # Replication
//
// A claim survives a failover only if the promoted server had it when the
// old primary acknowledged it. [Store.CheckReplication], which idem.New
// calls at start, refuses asynchronous replicas, semi-synchronous
// replication that fell back to asynchronous, waits AFTER_COMMIT, or has
// no acknowledging replica, a Galera node outside the Primary component,
// sessions that do not replicate (sql_log_bin=0, wsrep_on=0), and a
// replica or read-only server; semi-synchronous AFTER_SYNC is safe with a
// warning about its timeout, and a Synced Galera node of the Primary
// component and a standalone server are safe. See
// docs/replication.md for what each topology keeps, measured.
//
// # Errors
//
// Fenced and missing records match [idem.ErrFenced] and [idem.ErrNotFound];
// a closed store, [idem.ErrClosed]; driver errors are wrapped in an
// [*idem.StoreError] (which matches [idem.ErrStoreUnavailable] and unwraps to
// the driver's *mysql.MySQLError). Invalid parameters return plain errors
// that name the field.
package mysqlstore
