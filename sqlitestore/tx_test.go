package sqlitestore

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

// chargeInTx claims, applies a local effect (a row in ledger) and records
// the outcome, all inside one transaction.
func chargeInTx(t *testing.T, s *Store, key string, commit bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ts := s.WithTx(tx)
	r := mustClaim(t, ts, claimParams(key, "att-1"))
	if !r.Claimed {
		t.Fatalf("claim in tx not claimed: %+v", r)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (key, amount) VALUES (?, 50)`, key); err != nil {
		t.Fatal(err)
	}
	mustFinish(t, ts, finishParams(r.Record, idem.StateSucceeded, "charged"))
	// The transaction sees its own record.
	if got := mustGet(t, ts, key); got.State != idem.StateSucceeded {
		t.Fatalf("in-tx get = %+v", got)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

func ledgerRows(t *testing.T, s *Store, key string) int {
	t.Helper()
	var n int
	if err := s.readers.QueryRow(`SELECT count(*) FROM ledger WHERE key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTxRecordAndEffectCommitTogether(t *testing.T) {
	s := newStore(t)
	if _, err := s.DB().Exec(`CREATE TABLE ledger (key TEXT NOT NULL, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	chargeInTx(t, s, "order-rolled-back", false)
	if _, err := s.Get(ctx, "tenant-a", "order-rolled-back"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("record after rollback: %v, want ErrNotFound", err)
	}
	if n := ledgerRows(t, s, "order-rolled-back"); n != 0 {
		t.Fatalf("effect rows after rollback = %d, want 0", n)
	}

	chargeInTx(t, s, "order-committed", true)
	if got := mustGet(t, s, "order-committed"); got.State != idem.StateSucceeded || string(got.Result) != "charged" {
		t.Fatalf("record after commit = %+v", got)
	}
	if n := ledgerRows(t, s, "order-committed"); n != 1 {
		t.Fatalf("effect rows after commit = %d, want 1", n)
	}
	// A duplicate through a new transaction replays and writes no effect.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if r := mustClaim(t, s.WithTx(tx), claimParams("order-committed", "att-2")); r.Claimed {
		t.Fatal("duplicate claim in a tx was Claimed")
	}
}

func TestWithTxClosed(t *testing.T) {
	s := newStore(t)
	tx, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ts := s.WithTx(tx)
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Claim(context.Background(), claimParams("k", "a")); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("claim on a closed WithTx store: %v, want ErrClosed", err)
	}
}
