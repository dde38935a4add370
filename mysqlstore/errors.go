package mysqlstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
)

// MySQL server error numbers the store interprets.
const (
	erDupEntry     = 1062 // ER_DUP_ENTRY: the primary key decided a claim
	erLockDeadlock = 1213 // ER_LOCK_DEADLOCK: the transaction was rolled back
	erNoSuchTable  = 1146 // ER_NO_SUCH_TABLE: migrations not applied
	// ER_BINLOG_STMT_MODE_AND_ROW_ENGINE: a READ COMMITTED write refused
	// under binlog_format=STATEMENT.
	erBinlogNeedsRow = 1665
)

func mysqlErrno(err error) uint16 {
	if err == nil {
		return 0 // before errors.As, whose target escapes: no allocation on success
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isDuplicate(err error) bool { return mysqlErrno(err) == erDupEntry }

// retryable reports whether a failed statement may simply run again: a
// deadlock victim in autocommit mode lost only that statement. Inside the
// caller's transaction InnoDB rolled back the whole transaction, so it may
// not.
func (s *Store) retryable(err error) bool {
	return s.tx == nil && mysqlErrno(err) == erLockDeadlock
}

// wrap translates a backend error at the boundary: a closed pool becomes
// idem.ErrClosed, everything else an *idem.StoreError (which matches
// idem.ErrStoreUnavailable and unwraps to the driver error).
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	// database/sql does not export its "database is closed" error.
	if strings.Contains(err.Error(), "sql: database is closed") {
		return fmt.Errorf("mysqlstore: %s: %w", op, idem.ErrClosed)
	}
	if mysqlErrno(err) == erNoSuchTable {
		err = fmt.Errorf("%w (has the schema been migrated? see Store.Migrate)", err)
	}
	return &idem.StoreError{Op: op, Err: err}
}

// fenced reports a write refused because the record moved on.
func fenced(op string, r *idem.Record, fence int64, attempt string) error {
	if r == nil {
		return fmt.Errorf("mysqlstore: %s: no record for fence %d attempt %q: %w", op, fence, attempt, idem.ErrFenced)
	}
	return fmt.Errorf("mysqlstore: %s: record %q is %s at fence %d attempt %q, not fence %d attempt %q: %w",
		op, r.Key, r.State, r.Fence, r.AttemptID, fence, attempt, idem.ErrFenced)
}

func notFound(op, scope, key string) error {
	return fmt.Errorf("mysqlstore: %s: scope %q key %q: %w", op, scope, key, idem.ErrNotFound)
}

// checkIdentity refuses values the columns cannot hold exactly. MySQL in
// non-strict mode would truncate a long key silently and merge two intents.
func checkIdentity(scope, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(scope) > maxIDLen {
		return fmt.Errorf("mysqlstore: scope is %d bytes, longer than %d", len(scope), maxIDLen)
	}
	return nil
}

func checkKey(key string) error {
	if key == "" {
		return &idem.KeyError{Reason: "empty"}
	}
	if len(key) > idem.MaxKeyLen {
		return &idem.KeyError{Key: key[:64], Reason: fmt.Sprintf("longer than %d bytes", idem.MaxKeyLen)}
	}
	return nil
}

func checkAttempt(id string) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("mysqlstore: attempt id is %d bytes, longer than %d", len(id), maxIDLen)
	}
	return nil
}

// maxIDLen is the size of the scope, key and attempt_id columns.
const maxIDLen = 255

// maxMarkLen is the size of the mark column.
const maxMarkLen = 32
