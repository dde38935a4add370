package pgstore

import (
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
)

// WithTx returns a view of the store whose operations run inside tx, so that
// a local write and its record commit or roll back together: claim, do the
// write, finish, commit. The caller owns tx; the view's Close does nothing.
//
// tx must use READ COMMITTED (PostgreSQL's default). Each statement then
// takes a fresh snapshot, which lets Claim retry past a concurrent inserter
// it had to wait for (see the package documentation). Under REPEATABLE READ
// or SERIALIZABLE, a claim that meets a key committed after the transaction
// began fails with a serialization error (SQLSTATE 40001): roll back and
// retry the whole transaction.
//
// A failed statement aborts a PostgreSQL transaction, so the view never
// retries a statement that returned an error; Claim loops only while its
// statement succeeds without returning a row. Notifications sent by the
// view's writes are delivered when tx commits, and dropped if it rolls back.
//
// With Config.ReplicatedClaims, a claim made in tx sets synchronous_commit
// for the rest of tx, so the caller's COMMIT waits for the synchronous
// standbys: the claim and the local write it guards survive a failover
// together or not at all. The wait is the caller's: a COMMIT whose wait
// was cancelled reports success with a WARNING, which only the caller's
// connection sees.
func (s *Store) WithTx(tx pgx.Tx) idem.Store {
	return txStore{ops{st: s, db: pgxQuerier{db: tx, tx: true}, sql: s.sql}}
}

// WithSQLTx is [Store.WithTx] for a database/sql transaction on a *sql.DB
// opened with pgx's stdlib driver (driver name "pgx"); other drivers are not
// supported. The same isolation requirements apply.
func (s *Store) WithSQLTx(tx *sql.Tx) idem.Store {
	return txStore{ops{st: s, db: sqlQuerier{tx: tx}, sql: s.sql}}
}

// txStore runs a store's operations in a caller's transaction.
type txStore struct{ ops }

// Close does nothing: the caller owns the transaction and the store.
func (txStore) Close() error { return nil }
