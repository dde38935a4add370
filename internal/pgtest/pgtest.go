// Package pgtest gives tests outside pgstore a PostgreSQL store in a fresh
// schema of its own, dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// Store returns a migrated pgstore in a new schema, skipping t when
// PostgreSQL is unavailable (failing under IDEM_REQUIRE_SERVICES=1). The
// store is closed and the schema dropped when t ends.
func Store(t testing.TB) (*pgstore.Store, string) {
	t.Helper()
	dsn := testenv.Postgres.Need(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemtest_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() {
		_ = st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return st, schema
}
