package pgstore

import (
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

var (
	errNilPool       = errors.New("pgstore: New: pool is nil")
	errNilPoolConfig = errors.New("pgstore: OpenConfig: pool configuration is nil")
)

// wrap translates a backend error at the boundary: "no rows" becomes
// idem.ErrNotFound, anything else an *idem.StoreError naming the operation
// (it matches idem.ErrStoreUnavailable and unwraps to the driver error, so
// context errors and *pgconn.PgError remain reachable with errors.Is/As).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if isNoRows(err) {
		return idem.ErrNotFound
	}
	return &idem.StoreError{Op: op, Err: err}
}

func errClosed(op string) error { return fmt.Errorf("pgstore: %s: %w", op, idem.ErrClosed) }

// fenced reports a write refused because the record moved on. It matches
// idem.ErrFenced.
func fenced(op, scope, key string, fence int64) error {
	return fmt.Errorf("pgstore: %s %q/%q at fence %d: %w", op, scope, key, fence, idem.ErrFenced)
}
