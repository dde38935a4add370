package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// finishKnownStores are the ways a Finish reaches PostgreSQL: on the pool
// with and without notifications, in a caller's pgx and database/sql
// transaction, and through group commit (which keeps the general path).
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
}

// TestFinishWithClaimReturnsStoredRecord: a Finish given the caller's
// claim (FinishParams.Claim, as the engine passes it) writes with one
// UPDATE that returns no record and builds the record from the claim. The
// record it returns must be the stored one even when the stored record
// moved on since the claim (a heartbeat, a mark, an unknown outcome) or
// the hint does not describe it, and the write stays fenced.
func TestFinishWithClaimReturnsStoredRecord(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		before func(t *testing.T, st idem.Store, claim *idem.Record) // may change the store or the hint
	}{
		{"fresh claim", func(*testing.T, idem.Store, *idem.Record) {}},
		{"lease extended", func(t *testing.T, st idem.Store, c *idem.Record) {
			if err := st.Heartbeat(context.Background(), idem.HeartbeatParams{Scope: c.Scope, Key: c.Key, Fence: c.Fence,
				AttemptID: c.AttemptID, LeaseUntil: c.LeaseUntil.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"mark set", func(t *testing.T, st idem.Store, c *idem.Record) {
			if err := st.SetMark(context.Background(), c.Scope, c.Key, c.Fence, idem.MarkReconciled); err != nil {
				t.Fatal(err)
			}
		}},
		{"marked unknown", func(t *testing.T, st idem.Store, c *idem.Record) {
			if _, err := st.Finish(context.Background(), idem.FinishParams{Scope: c.Scope, Key: c.Key, Fence: c.Fence,
				AttemptID: c.AttemptID, State: idem.StateUnknown, CompletedAt: t0.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"hint with another fingerprint", func(_ *testing.T, _ idem.Store, c *idem.Record) {
			c.Fingerprint = idem.NewFingerprint([]byte("other"))
		}},
		{"hint with another intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = []byte(`{"op":"other"}`) }},
		{"hint with no intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = nil }},
		{"hint with another mark", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Mark = idem.MarkReconciled }},
		{"hint with another creation time", func(_ *testing.T, _ idem.Store, c *idem.Record) {
			c.CreatedAt = c.CreatedAt.Add(time.Microsecond)
		}},
		{"hint with no lease", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.LeaseUntil = time.Time{} }},
	}
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t)
			ctx := context.Background()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					key := "k:" + tc.name
					claim := mustClaim(t, st, claimParams(key, "a1", t0))
					hint := claim.Record
					tc.before(t, st, &hint)
					p := succeed(claim, "result", t0.Add(2*time.Second), time.Hour)
					p.Claim = hint
					rec := mustFinish(t, st, p)
					got, err := st.Get(ctx, "tenant-1", key)
					if err != nil {
						t.Fatal(err)
					}
					if got.State != idem.StateSucceeded || string(got.Result) != "result" {
						t.Fatalf("stored after Finish: %+v", got)
					}
					if !reflect.DeepEqual(rec, got) {
						t.Fatalf("Finish returned\n %+v\nstored\n %+v", rec, got)
					}
					// Retried with the same outcome: success, nothing changes.
					if again := mustFinish(t, st, p); !reflect.DeepEqual(again, got) {
						t.Fatalf("retried Finish = %+v; want %+v", again, got)
					}
					// Another outcome over the recorded one: fenced, not written.
					other := succeed(claim, "other", t0.Add(3*time.Second), time.Hour)
					other.Claim = hint
					if _, err := st.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
						t.Fatalf("second outcome: err = %v, want ErrFenced", err)
					}
					if after, _ := st.Get(ctx, "tenant-1", key); !reflect.DeepEqual(after, got) {
						t.Fatalf("a refused Finish changed the record: %+v, was %+v", after, got)
					}
				})
			}
		})
	}
}

// TestFinishWithStaleClaimIsFenced: the claim a Finish carries does not
// make a taken-over record writable. The record is re-driven keeping every
// column the claim describes but the fence and attempt, so only the fence
// and attempt conditions tell the old attempt from the new holder.
func TestFinishWithStaleClaimIsFenced(t *testing.T) {
	t.Parallel()
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t)
			ctx := context.Background()
			for _, redrive := range []struct {
				attempt string // the new holder
				fence   int64  // the fence the old attempt presents
			}{
				{"a2", 1}, // a1 with its own claim
				{"a2", 2}, // a1 with its claim under the new fence: only the attempt differs
				{"a1", 1}, // the same attempt id took it over: only the fence differs
			} {
				key := "k:" + redrive.attempt + ":" + string(rune('0'+redrive.fence))
				claim := mustClaim(t, st, claimParams(key, "a1", t0))
				taken, err := st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: key, Fence: 1,
					From: []idem.State{idem.StateInProgress}, To: idem.StateInProgress,
					AttemptID: redrive.attempt, Now: t0, LeaseUntil: claim.Record.LeaseUntil})
				if err != nil {
					t.Fatal(err)
				}
				p := succeed(claim, "late", t0.Add(time.Second), time.Hour)
				p.Fence = redrive.fence
				p.Claim = claim.Record
				p.Claim.Fence = p.Fence
				if _, err := st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
					t.Fatalf("Finish(fence %d, a1) over the record re-driven by %s: err = %v, want ErrFenced",
						p.Fence, redrive.attempt, err)
				}
				if got, _ := st.Get(ctx, "tenant-1", key); !reflect.DeepEqual(got, taken) {
					t.Fatalf("the re-driven record changed: %+v, want %+v", got, taken)
				}
			}
			// Released: absent, fenced.
			c := mustClaim(t, st, claimParams("gone", "a1", t0))
			p := succeed(c, "r", t0, time.Hour)
			p.Claim = c.Record
			if err := st.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "gone", Fence: 1, AttemptID: "a1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("Finish of a released claim: err = %v, want ErrFenced", err)
			}
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
	for _, kind := range finishKnownStores[:4] { // group commit never takes it
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
