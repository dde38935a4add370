package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestChecksDropped: migration 0002 leaves the table without CHECK
// constraints (PostgreSQL re-plans them in every INSERT and UPDATE), also
// on a table that an earlier version created with them.
func TestChecksDropped(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	pool := sharedPool()
	checks := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'",
			s.QuotedTable()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := checks(); n != 0 {
		t.Fatalf("a migrated table has %d CHECK constraints, want 0", n)
	}
	// A table as version 0001 left it: the constraints, and 0002 not applied.
	migrations := pgx.Identifier{s.Schema(), "idem_records_migrations"}.Sanitize()
	for _, q := range []string{
		"ALTER TABLE " + s.QuotedTable() + " ADD CONSTRAINT idem_records_state_check CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown'))",
		"ALTER TABLE " + s.QuotedTable() + " ADD CONSTRAINT idem_records_fence_check CHECK (fence > 0)",
		"DELETE FROM " + migrations + " WHERE version = 2",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := checks(); n != 0 {
		t.Fatalf("after migrating a 0001 table: %d CHECK constraints, want 0", n)
	}
}

// TestInvalidRowsAreErrors: with no CHECK constraints, a row that no idem
// writer produces (written by hand, or by a broken tool) must surface as an
// error from every read, and a claim of its key must not take it over or
// report it as a record.
func TestInvalidRowsAreErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	ins := "INSERT INTO " + s.QuotedTable() + ` (scope, key, fingerprint, state, fence, attempt_id, created_at, completed_at, expires_at)
		VALUES ('tenant-1', $1, $2, $3, $4, 'x', $5, $5, $5)`
	old := t0.Add(-time.Hour) // expired, were it a valid terminal record
	rows := []struct {
		key, state string
		fence      int64
	}{
		{"fence-zero", "succeeded", 0},
		{"fence-negative", "in_progress", -3},
		{"bad-state", "done", 1},
	}
	for _, r := range rows {
		fp := idem.NewFingerprint([]byte(r.key))
		if _, err := sharedPool().Exec(ctx, ins, r.key, fp[:], r.state, r.fence, old); err != nil {
			t.Fatalf("insert %s: %v", r.key, err)
		}
	}
	for _, r := range rows {
		if rec, err := s.Get(ctx, "tenant-1", r.key); err == nil || errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Get(%s) = %+v, %v; want an error", r.key, rec, err)
		}
		if res, err := s.Claim(ctx, claimParams(r.key, "a", t0)); err == nil {
			t.Errorf("Claim(%s) = %+v; want an error", r.key, res)
		}
	}
}
