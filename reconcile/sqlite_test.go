package reconcile_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func newSQLite(t *testing.T) idem.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{
		Path: filepath.Join(t.TempDir(), "idem.db"), Synchronous: "NORMAL", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSQLite(t *testing.T) { runSuite(t, newSQLite) }
