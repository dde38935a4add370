package reconcile_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
)

// newPostgres returns a migrated pgstore in a fresh schema; the suite closes
// it, and the schema is dropped when t ends.
func newPostgres(t *testing.T) idem.Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPostgres(t *testing.T) { runSuite(t, newPostgres) }
