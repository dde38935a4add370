package pgstore_test

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/storetest"
)

// finishKnownStores are the ways a Finish reaches PostgreSQL: on the pool
// with and without notifications, in a caller's pgx and database/sql
// transaction, with claims batched, and with outcomes batched too (the
// one UPDATE then goes into the group commit).
var finishKnownStores = []struct {
	name string
	open func(t *testing.T) idem.Store
}{
	{"pool", func(t *testing.T) idem.Store { return newStore(t, pgstore.Config{}) }},
	{"notify disabled", func(t *testing.T) idem.Store { return newStore(t, pgstore.Config{DisableNotify: true}) }},
	{"pgx transaction", func(t *testing.T) idem.Store {
		s := newStore(t, pgstore.Config{})
		tx, err := sharedPool().Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return s.WithTx(tx)
	}},
	{"sql transaction", func(t *testing.T) idem.Store {
		s := newStore(t, pgstore.Config{DisableNotify: true})
		db, err := sql.Open("pgx", shared.dsn)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(); _ = db.Close() })
		return s.WithSQLTx(tx)
	}},
	{"batched", func(t *testing.T) idem.Store {
		return newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: 100 * time.Microsecond, MaxSize: 8}})
	}},
	{"batched outcomes", func(t *testing.T) idem.Store {
		return newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: 100 * time.Microsecond, MaxSize: 8}, BatchFinishes: true})
	}},
}

// TestFinishWithClaim runs the hint checks of the conformance suite on each
// kind of store: the one-UPDATE finish builds its record from the claim,
// and that record must be the stored one however the record moved on, with
// every write still fenced.
func TestFinishWithClaim(t *testing.T) {
	t.Parallel()
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			storetest.FinishWithClaim(t, kind.open(t), "tenant-1", t0)
		})
	}
}

// TestFinishKnownTakesTheClaim: the one-UPDATE path applies to the claims
// a caller really holds (with or without intent and lease, at any time
// zone and precision, after an unknown mark), and not to a hint that is
// not this attempt's claim or to an unknown outcome.
func TestFinishKnownTakesTheClaim(t *testing.T) {
	t.Parallel()
	local := time.FixedZone("UTC+3", 3*3600)
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t)
			ctx := context.Background()
			for i, tc := range []struct {
				claim func(p *idem.ClaimParams)
				hint  func(c *idem.Record) // the same record as a caller may hold it
			}{
				{func(*idem.ClaimParams) {}, func(*idem.Record) {}},
				{func(p *idem.ClaimParams) { p.Intent = nil }, func(*idem.Record) {}},
				// An empty intent is stored as such, not as NULL: the hint
				// must say so (as a read does) for the one UPDATE to apply.
				{func(p *idem.ClaimParams) { p.Intent = []byte{} }, func(c *idem.Record) { c.Intent = []byte{} }},
				{func(p *idem.ClaimParams) { p.LeaseUntil = time.Time{} }, func(*idem.Record) {}},
				{func(p *idem.ClaimParams) {
					p.Now = time.Date(2030, 1, 2, 15, 0, 0, 123456789, local)
					p.LeaseUntil = p.Now.Add(time.Minute + 999*time.Nanosecond)
				}, func(c *idem.Record) {
					c.CreatedAt = c.CreatedAt.In(local).Add(999 * time.Nanosecond)
					c.LeaseUntil = c.LeaseUntil.In(local).Add(1)
				}},
			} {
				cp := claimParams("k"+string(rune('a'+i)), "a1", t0)
				tc.claim(&cp)
				claim := mustClaim(t, st, cp)
				if i == 0 {
					mustFinish(t, st, idem.FinishParams{Scope: cp.Scope, Key: cp.Key, Fence: 1, AttemptID: "a1",
						State: idem.StateUnknown, CompletedAt: t0})
				}
				p := succeed(claim, "", time.Date(2030, 1, 2, 16, 0, 0, 987654321, local), time.Hour+1)
				p.State, p.Result = idem.StateFailed, nil
				p.Claim = claim.Record
				tc.hint(&p.Claim)
				rec, err := pgstore.FinishKnown(ctx, st, p)
				if err != nil || rec == nil {
					t.Fatalf("case %d: finishKnown = %v, %v; want the record", i, rec, err)
				}
				got, err := st.Get(ctx, cp.Scope, cp.Key)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rec, got) {
					t.Fatalf("case %d: finishKnown returned\n %+v\nstored\n %+v", i, rec, got)
				}
			}
			claim := mustClaim(t, st, claimParams("other", "a1", t0))
			hinted := func(edit func(p *idem.FinishParams)) idem.FinishParams {
				p := succeed(claim, "x", t0, time.Hour)
				p.Claim = claim.Record
				edit(&p)
				return p
			}
			for name, p := range map[string]idem.FinishParams{
				"no hint":         succeed(claim, "x", t0, time.Hour),
				"unknown":         hinted(func(p *idem.FinishParams) { p.State, p.Result, p.ExpiresAt = idem.StateUnknown, nil, time.Time{} }),
				"another key":     hinted(func(p *idem.FinishParams) { p.Claim.Key = "k" }),
				"another scope":   hinted(func(p *idem.FinishParams) { p.Claim.Scope = "s" }),
				"another fence":   hinted(func(p *idem.FinishParams) { p.Claim.Fence = 2 }),
				"another attempt": hinted(func(p *idem.FinishParams) { p.Claim.AttemptID = "a2" }),
			} {
				if rec, err := pgstore.FinishKnown(ctx, st, p); rec != nil || err != nil {
					t.Fatalf("%s: finishKnown = %+v, %v; want no fast path", name, rec, err)
				}
			}
			if got, err := st.Get(ctx, "tenant-1", "other"); err != nil || got.State != idem.StateInProgress {
				t.Fatalf("a refused fast path wrote: %+v, %v", got, err)
			}
		})
	}
}

// TestFinishWithClaimNotifies: the one-UPDATE finish still wakes a waiter
// that flagged the record, though it returns no record.
func TestFinishWithClaimNotifies(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	a := mustClaim(t, s, claimParams("a", "x", t0))
	b := mustClaim(t, s, claimParams("b", "x", t0))
	cha, _ := subscribe(t, s, "a")
	chb, _ := subscribe(t, s, "b")
	drain(cha)
	drain(chb)
	p := succeed(a, "ok", t0, time.Hour)
	p.Claim = a.Record
	if rec, err := pgstore.FinishKnown(context.Background(), s, p); err != nil || rec == nil {
		t.Fatalf("finishKnown = %v, %v; want the record", rec, err)
	}
	mustReceive(t, cha, "finish of a with its claim")
	mustBeEmpty(t, chb, "b woken by the finish of a")
	p = succeed(b, "ok", t0, time.Hour)
	p.Claim = b.Record
	mustFinish(t, s, p)
	mustReceive(t, chb, "finish of b with its claim")
}
