package pgstore_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/reconcile/reconciletest"
)

// TestReconcile runs the reconciler's suite on PostgreSQL, each test in a
// migrated store in a fresh schema.
func TestReconcile(t *testing.T) {
	reconciletest.Run(t, func(t *testing.T) idem.Store { return newStore(t, pgstore.Config{}) })
}
