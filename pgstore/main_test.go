package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeSharedPool()
	if code == 0 {
		// Every store, listener and pool is closed by now.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	dsn  string
	err  error
}

// testPool returns the package's shared pool (16 connections), skipping t
// when PostgreSQL is unavailable.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := testenv.Postgres.Need(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 16
		shared.dsn = dsn
		shared.pool, shared.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if shared.err != nil {
		t.Fatalf("connect: %v", shared.err)
	}
	return shared.pool
}

// sharedPool is the pool made by testPool; call testPool first.
func sharedPool() *pgxpool.Pool { return shared.pool }

func closeSharedPool() {
	if shared.pool != nil {
		shared.pool.Close()
	}
}

// freshSchema returns a new schema name, dropped when t ends.
func freshSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	schema := "idemtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// newStore returns a migrated store in a fresh schema, closed when t ends.
func newStore(t testing.TB, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	pool := testPool(t)
	cfg.Schema = freshSchema(t, pool)
	cfg.Migrate = true
	s, err := pgstore.New(context.Background(), pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// t0 is the tests' clock: microsecond precision, UTC, like the engine's.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func claimParams(key, attempt string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{
		Scope:       "tenant-1",
		Key:         key,
		Fingerprint: idem.NewFingerprint([]byte(key)),
		AttemptID:   attempt,
		Intent:      []byte(`{"op":"charge"}`),
		Now:         now,
		LeaseUntil:  now.Add(30 * time.Second),
	}
}

func mustClaim(t testing.TB, st idem.Store, p idem.ClaimParams) idem.ClaimResult {
	t.Helper()
	res, err := st.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", p.Key, p.AttemptID, err)
	}
	return res
}

func succeed(c idem.ClaimResult, result string, at time.Time, ttl time.Duration) idem.FinishParams {
	return idem.FinishParams{
		Scope: c.Record.Scope, Key: c.Record.Key, Fence: c.Record.Fence, AttemptID: c.Record.AttemptID,
		State: idem.StateSucceeded, Result: []byte(result), CompletedAt: at, ExpiresAt: at.Add(ttl),
	}
}

func mustFinish(t testing.TB, st idem.Store, p idem.FinishParams) *idem.Record {
	t.Helper()
	rec, err := st.Finish(context.Background(), p)
	if err != nil {
		t.Fatalf("Finish(%s, fence %d, %s): %v", p.Key, p.Fence, p.State, err)
	}
	return rec
}
