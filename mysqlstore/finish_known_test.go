package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestFinishWithClaimReturnsStoredRecord: a Finish given the caller's
// claim (FinishParams.Claim, as the engine passes it) writes with one
// UPDATE and builds the record from the claim instead of reading it. The
// record it returns must be the stored one even when the stored record
// moved on since the claim (a heartbeat, a mark, an unknown outcome) or
// the hint does not describe it, and the write stays fenced.
func TestFinishWithClaimReturnsStoredRecord(t *testing.T) {
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
		{"hint with another fingerprint", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Fingerprint = fp("other") }},
		{"hint with another intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = []byte(`{"op":"other"}`) }},
		{"hint with empty intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = []byte{} }},
		{"hint with another mark", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Mark = idem.MarkReconciled }},
		{"hint with another creation time", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.CreatedAt = c.CreatedAt.Add(time.Microsecond) }},
		{"hint with another lease", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.LeaseUntil = time.Time{} }},
	}
	for _, inTx := range []bool{false, true} {
		f := newFixture(t)
		for _, tc := range cases {
			name := tc.name
			if inTx {
				name += " in a transaction"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				var st idem.Store = f.st
				var tx *sql.Tx
				if inTx {
					var err error
					if tx, err = f.db.BeginTx(ctx, nil); err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					st = f.st.WithTx(tx)
				}
				key := "k:" + name
				claim := mustClaim(t, st, claimParams(key, "a1", t0)).Record
				hint := claim
				tc.before(t, st, &hint)
				p := succeed(key, "a1", 1, "result", t0.Add(2*time.Second))
				p.Claim = hint
				rec, err := st.Finish(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
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
				again, err := st.Finish(ctx, p)
				if err != nil || !reflect.DeepEqual(again, got) {
					t.Fatalf("retried Finish = %+v, %v; want %+v", again, err, got)
				}
				// Another outcome over the recorded one: fenced, not written.
				other := succeed(key, "a1", 1, "other", t0.Add(3*time.Second))
				other.Claim = hint
				if _, err := st.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
					t.Fatalf("second outcome: err = %v, want ErrFenced", err)
				}
				if after, _ := st.Get(ctx, "tenant-1", key); !reflect.DeepEqual(after, got) {
					t.Fatalf("a refused Finish changed the record: %+v, was %+v", after, got)
				}
			})
		}
	}
}

// TestFinishWithStaleClaimIsFenced: the claim a Finish carries does not
// make a taken-over record writable: the old attempt is fenced and the new
// holder's record is untouched.
func TestFinishWithStaleClaimIsFenced(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := mustClaim(t, f.st, claimParams("k", "a1", t0)).Record
	if _, err := f.st.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: 1, AttemptID: "a1",
		State: idem.StateUnknown, CompletedAt: t0}); err != nil {
		t.Fatal(err)
	}
	taken, err := f.st.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "k", Fence: 1, To: idem.StateInProgress,
		AttemptID: "a2", Now: t0.Add(time.Second), LeaseUntil: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []idem.FinishParams{
		succeed("k", "a1", 1, "late", t0.Add(2*time.Second)), // the old attempt with its own claim
		succeed("k", "a1", 2, "late", t0.Add(2*time.Second)), // the old attempt under the new fence
	} {
		p.Claim = old
		p.Claim.Fence = p.Fence
		if _, err := f.st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("Finish(fence %d, a1) over the re-driven record: err = %v, want ErrFenced", p.Fence, err)
		}
	}
	if got, _ := f.st.Get(ctx, "tenant-1", "k"); !reflect.DeepEqual(got, taken) {
		t.Fatalf("the re-driven record changed: %+v, want %+v", got, taken)
	}
	// Released: absent, fenced.
	p := succeed("gone", "a1", 1, "r", t0)
	p.Claim = mustClaim(t, f.st, claimParams("gone", "a1", t0)).Record
	if err := f.st.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "gone", Fence: 1, AttemptID: "a1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish of a released claim: err = %v, want ErrFenced", err)
	}
}
