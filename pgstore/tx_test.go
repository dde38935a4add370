package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// autoTx is an idem.Store that runs every operation through the twin in its
// own transaction, committed on success and rolled back on error.
type autoTx struct{ s *pgstore.Store }

func inTx[T any](ctx context.Context, a autoTx, fn func(st idem.Store) (T, error)) (T, error) {
	var zero T
	tx, err := sharedPool().Begin(ctx)
	if err != nil {
		return zero, err
	}
	v, err := fn(a.s.WithTx(tx))
	if err != nil {
		tx.Rollback(ctx)
		return zero, err
	}
	return v, tx.Commit(ctx)
}

func (a autoTx) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	return inTx(ctx, a, func(st idem.Store) (idem.ClaimResult, error) { return st.Claim(ctx, p) })
}
func (a autoTx) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	return inTx(ctx, a, func(st idem.Store) (*idem.Record, error) { return st.Finish(ctx, p) })
}
func (a autoTx) Release(ctx context.Context, p idem.ReleaseParams) error {
	_, err := inTx(ctx, a, func(st idem.Store) (any, error) { return nil, st.Release(ctx, p) })
	return err
}
func (a autoTx) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	_, err := inTx(ctx, a, func(st idem.Store) (any, error) { return nil, st.Heartbeat(ctx, p) })
	return err
}
func (a autoTx) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	return inTx(ctx, a, func(st idem.Store) (*idem.Record, error) { return st.Resolve(ctx, p) })
}
func (a autoTx) SetMark(ctx context.Context, scope, key string, fence int64, m idem.Mark) error {
	_, err := inTx(ctx, a, func(st idem.Store) (any, error) { return nil, st.SetMark(ctx, scope, key, fence, m) })
	return err
}
func (a autoTx) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	return inTx(ctx, a, func(st idem.Store) (*idem.Record, error) { return st.Get(ctx, scope, key) })
}
func (a autoTx) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	return inTx(ctx, a, func(st idem.Store) ([]idem.Record, error) { return st.List(ctx, f) })
}
func (a autoTx) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	return inTx(ctx, a, func(st idem.Store) (int, error) { return st.Sweep(ctx, p) })
}
func (a autoTx) Close() error { return a.s.Close() }

// localTable creates the caller's own table next to the records.
func localTable(t *testing.T, s *pgstore.Store) string {
	t.Helper()
	name := pgx.Identifier{s.Config().Schema, "ledger"}.Sanitize()
	if _, err := sharedPool().Exec(context.Background(), "CREATE TABLE "+name+" (key text PRIMARY KEY, amount int)"); err != nil {
		t.Fatal(err)
	}
	return name
}

// effectInTx claims, writes the local effect and finishes, all through st.
func effectInTx(t *testing.T, ctx context.Context, st idem.Store, exec func(string, ...any) error, table, key string) {
	t.Helper()
	c := mustClaim(t, st, claimParams(key, "a1", t0))
	if !c.Claimed {
		t.Fatalf("claim in tx not claimed: %+v", c)
	}
	if err := exec("INSERT INTO "+table+" (key, amount) VALUES ($1, 500)", key); err != nil {
		t.Fatal(err)
	}
	mustFinish(t, st, succeed(c, "charged", t0, time.Hour))
}

// checkBoth asserts that the record and the local row exist together or not
// at all.
func checkBoth(t *testing.T, s *pgstore.Store, table, key string, want bool) {
	t.Helper()
	ctx := context.Background()
	rec, err := s.Get(ctx, "tenant-1", key)
	var rows int
	if qerr := sharedPool().QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE key = $1", key).Scan(&rows); qerr != nil {
		t.Fatal(qerr)
	}
	if want && (err != nil || rec.State != idem.StateSucceeded || rows != 1) {
		t.Fatalf("after commit: record %+v (%v), %d local rows; want both", rec, err, rows)
	}
	if !want && (!errors.Is(err, idem.ErrNotFound) || rows != 0) {
		t.Fatalf("after rollback: record %+v (%v), %d local rows; want neither", rec, err, rows)
	}
}

func TestWithTxCommitAndRollback(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	table := localTable(t, s)
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		key := map[bool]string{false: "rolled-back", true: "committed"}[commit]
		tx, err := sharedPool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }
		effectInTx(t, ctx, s.WithTx(tx), exec, table, key)
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkBoth(t, s, table, key, commit)
	}
}

func TestWithSQLTxCommitAndRollback(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	table := localTable(t, s)
	db, err := sql.Open("pgx", shared.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		key := map[bool]string{false: "rolled-back", true: "committed"}[commit]
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err }
		st := s.WithSQLTx(tx)
		effectInTx(t, ctx, st, exec, table, key)
		// Reads and lists go through database/sql too.
		if recs, err := st.List(ctx, idem.ListFilter{States: []idem.State{idem.StateSucceeded}}); err != nil || len(recs) != 1 {
			t.Fatalf("List in sql tx = %v, %v", recs, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		checkBoth(t, s, table, key, commit)
	}
}

// TestWithTxRepeatableReadNeedsRetry documents the isolation requirement: a
// REPEATABLE READ transaction that meets a key committed after it began gets
// a serialization error, not a wrong answer.
func TestWithTxRepeatableReadNeedsRetry(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	tx, err := sharedPool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := s.WithTx(tx).Get(ctx, "tenant-1", "other"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatal(err) // takes the transaction's snapshot
	}
	mustClaim(t, s, claimParams("k", "winner", t0)) // commits outside tx
	_, err = s.WithTx(tx).Claim(ctx, claimParams("k", "loser", t0))
	if !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("claim under REPEATABLE READ after a concurrent commit: err = %v, want a serialization failure", err)
	}
	t.Logf("as documented: %v", err)
}
