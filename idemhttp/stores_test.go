package idemhttp_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(t *testing.T) idem.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"sqlite", func(t *testing.T) idem.Store {
			st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{
				Path: filepath.Join(t.TempDir(), "idem.db"), Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"postgres", func(t *testing.T) idem.Store {
			dsn, schema := pgtest.Schema(t)
			st, err := pgstore.Open(context.Background(), dsn, pgstore.Config{Schema: schema, Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}
