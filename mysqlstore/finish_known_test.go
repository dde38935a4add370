package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/storetest"
)

// TestFinishWithClaim runs the hint checks of the conformance suite on the
// store and inside a caller's transaction: the one-UPDATE finish builds its
// record from the claim, and that record must be the stored one however the
// record moved on, with every write still fenced.
func TestFinishWithClaim(t *testing.T) {
	f := newFixture(t)
	t.Run("store", func(t *testing.T) { storetest.FinishWithClaim(t, f.st, "tenant-1", t0) })
	t.Run("transaction", func(t *testing.T) {
		tx, err := f.db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		storetest.FinishWithClaim(t, f.st.WithTx(tx), "tenant-2", t0)
	})
}
