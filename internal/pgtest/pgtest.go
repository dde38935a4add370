// Package pgtest gives tests an isolated PostgreSQL schema.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/testenv"
)

// Schema returns the test server's DSN and the name of a fresh schema that
// is dropped when t ends. It skips (or fails under IDEM_REQUIRE_SERVICES=1)
// when PostgreSQL is unreachable. pgstore creates the schema on Migrate.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = testenv.Postgres.Need(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "idemt_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return dsn, schema
}

// DSN returns a postgres:// DSN for the idem CLI with a fresh schema
// (the schema query parameter), dropped when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	dsn, schema := Schema(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "schema=" + url.QueryEscape(schema)
}
