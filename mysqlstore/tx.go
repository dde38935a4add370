package mysqlstore

import (
	"database/sql"

	"github.com/idemkit/idem"
)

// WithTx returns a store whose operations run inside tx, so that a local
// write and its record commit or roll back together: claim, do the effect
// in tx, record the outcome in tx, commit. tx must come from the same
// database. The returned store's Close does nothing; the transaction's owner
// commits or rolls back.
//
// Isolation: under InnoDB's default REPEATABLE READ a plain SELECT reads the
// transaction's snapshot, which may predate a concurrent claim that just
// committed; the claim's INSERT, by contrast, checks the primary key against
// the latest data. So every read that decides a write here is a locking read
// (LOCK IN SHARE MODE after a duplicate, FOR UPDATE before an outcome
// write), which reads the latest committed row and keeps it locked until tx
// ends. READ COMMITTED works as well. Two consequences: a duplicate claim
// inside tx holds a shared lock on the existing record until tx ends, and a
// deadlock or lock-wait timeout aborts the caller's transaction, so the
// store cannot retry it; the error is returned and the caller retries the
// whole transaction.
func (s *Store) WithTx(tx *sql.Tx) idem.Store {
	c := *s
	c.q, c.tx, c.owned = tx, tx, false
	return &c
}
