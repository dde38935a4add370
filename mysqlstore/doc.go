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
// with [Store.Migrate], Config.Migrate, or the script from [MigrationsSQL].
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
// Departure from the design's performance model: a replay there costs one
// round trip. MySQL has no single statement that inserts or returns the
// existing row without writing (INSERT … RETURNING fails on a duplicate;
// ON DUPLICATE KEY UPDATE writes), so a replay here costs two round trips,
// and still no write. Reading first would make replays one round trip and
// every first request three (read, insert, finish); first requests are the
// common case, so the store inserts first.
//
// Outcome writes (Finish, Resolve) read the record, decide in Go, and write
// with an UPDATE conditioned on the fence, attempt and state that were read;
// Release, Heartbeat and SetMark write first and read only when nothing
// matched. MySQL reports changed rows, not matched rows (unless the DSN sets
// clientFoundRows), so "nothing changed" is always settled by a read, never
// taken as "fenced". Statements that lose a deadlock outside a transaction
// are retried.
//
// # Transactions
//
// [Store.WithTx] binds the store to the caller's *sql.Tx, so a local effect
// and its record commit together; its documentation explains the locking
// reads that make this correct under REPEATABLE READ.
//
// # Errors
//
// Fenced and missing records match [idem.ErrFenced] and [idem.ErrNotFound];
// a closed store, [idem.ErrClosed]; driver errors are wrapped in an
// [*idem.StoreError] (which matches [idem.ErrStoreUnavailable] and unwraps to
// the driver's *mysql.MySQLError). Invalid parameters return plain errors
// that name the field.
package mysqlstore
