package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
)

// paramError reports invalid input to a store operation. It is the
// caller's bug, not a store failure, so it is not wrapped as
// [idem.ErrStoreUnavailable].
type paramError struct{ msg string }

func (e *paramError) Error() string { return "sqlitestore: " + e.msg }

func badParam(format string, args ...any) error {
	return &paramError{msg: fmt.Sprintf(format, args...)}
}

// fenced returns an error matching idem.ErrFenced that says why.
func fenced(scope, key, why string) error {
	return fmt.Errorf("%w: %q/%q %s", idem.ErrFenced, scope, key, why)
}

func notFound(scope, key string) error {
	return fmt.Errorf("%w: %q/%q", idem.ErrNotFound, scope, key)
}

// translate turns a driver error into the idem vocabulary: idem's own
// sentinels and parameter errors pass through, a stray sql.ErrNoRows is
// ErrNotFound, and every other failure is an *idem.StoreError (matching
// ErrStoreUnavailable), which keeps the driver error for errors.As.
func translate(op string, err error) error {
	if err == nil {
		return nil // before pe below, which escapes: no allocation on success
	}
	return translateErr(op, err)
}

func translateErr(op string, err error) error {
	var pe *paramError
	switch {
	case errors.Is(err, idem.ErrFenced), errors.Is(err, idem.ErrNotFound),
		errors.Is(err, idem.ErrInvalidKey), errors.Is(err, idem.ErrClosed),
		errors.As(err, &pe):
		return err
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w (%s)", idem.ErrNotFound, op)
	}
	return &idem.StoreError{Op: op, Err: err}
}

// isClosedErr reports a database/sql error caused by a closed pool; the
// sentinel for it is unexported, so its message is matched.
func isClosedErr(err error) bool {
	return errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) ||
		strings.Contains(err.Error(), "sql: database is closed")
}
