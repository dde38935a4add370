package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile/reconciletest"
	"github.com/idemkit/idem/sqlitestore"
)

// TestReconcile runs the reconciler's suite on SQLite, each test in a store
// of its own.
func TestReconcile(t *testing.T) {
	reconciletest.Run(t, func(t *testing.T) idem.Store {
		t.Helper()
		st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), sqlitestore.Config{Synchronous: "NORMAL", Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
