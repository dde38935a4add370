package sqlitestore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// finishKnownStores are the three ways a Finish reaches the writer: on the
// store, inside a caller's transaction, and through group commit.
var finishKnownStores = []struct {
	name string
	open func(t *testing.T) idem.Store
}{
	{"store", func(t *testing.T) idem.Store { return newStore(t) }},
	{"transaction", func(t *testing.T) idem.Store {
		s := newStore(t)
		tx, err := s.DB().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return s.WithTx(tx)
	}},
	{"batched", func(t *testing.T) idem.Store {
		return openBatched(t, tempPath(t), Batch{Window: 100 * time.Microsecond, MaxSize: 8})
	}},
}

// TestFinishWithClaimReturnsStoredRecord: a Finish given the caller's
// claim (FinishParams.Claim, as the engine passes it) writes with one
// plain UPDATE and builds the record from the claim instead of reading it
// back. The record it returns must be the stored one even when the stored
// record moved on since the claim (a heartbeat, a mark, an unknown
// outcome) or the hint does not describe it, and the write stays fenced.
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
		{"hint with another fingerprint", func(_ *testing.T, _ idem.Store, c *idem.Record) {
			c.Fingerprint = idem.NewFingerprint([]byte("other"))
		}},
		{"hint with another intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = []byte(`{"amount":51}`) }},
		{"hint with empty intent", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Intent = []byte{} }},
		{"hint with another mark", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.Mark = idem.MarkReconciled }},
		{"hint with another creation time", func(_ *testing.T, _ idem.Store, c *idem.Record) {
			c.CreatedAt = c.CreatedAt.Add(time.Microsecond)
		}},
		{"hint with another lease", func(_ *testing.T, _ idem.Store, c *idem.Record) { c.LeaseUntil = time.Time{} }},
	}
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t)
			ctx := context.Background()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					key := "k:" + tc.name
					claim := mustClaim(t, st, claimParams(key, "a1")).Record
					hint := claim
					tc.before(t, st, &hint)
					p := finishParams(claim, idem.StateSucceeded, "result")
					p.Claim = hint
					rec := mustFinish(t, st, p)
					got := mustGet(t, st, key)
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
					other := finishParams(claim, idem.StateSucceeded, "other")
					other.Claim = hint
					if _, err := st.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
						t.Fatalf("second outcome: err = %v, want ErrFenced", err)
					}
					if after := mustGet(t, st, key); !reflect.DeepEqual(after, got) {
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
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.open(t)
			ctx := context.Background()
			old := mustClaim(t, st, claimParams("k", "a1")).Record
			for _, redrive := range []struct {
				attempt string
				p       idem.FinishParams
			}{
				// Taken over by a2 (fence 2): a1 presents its own claim, or
				// its claim under the new fence.
				{"a2", finishParams(old, idem.StateSucceeded, "late")},
				{"a2", func() idem.FinishParams {
					p := finishParams(old, idem.StateSucceeded, "late")
					p.Fence = 2
					return p
				}()},
				// Taken over by the same attempt id (fence 2): only the fence
				// tells them apart.
				{"a1", finishParams(old, idem.StateSucceeded, "late")},
			} {
				key := "k:" + redrive.attempt + ":" + string(rune('0'+redrive.p.Fence))
				claim := mustClaim(t, st, claimParams(key, "a1")).Record
				taken, err := st.Resolve(ctx, idem.ResolveParams{Scope: claim.Scope, Key: key, Fence: 1,
					From: []idem.State{idem.StateInProgress}, To: idem.StateInProgress,
					AttemptID: redrive.attempt, Now: t0, LeaseUntil: claim.LeaseUntil})
				if err != nil {
					t.Fatal(err)
				}
				p := redrive.p
				p.Key = key
				p.Claim = claim
				p.Claim.Fence = p.Fence
				if _, err := st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
					t.Fatalf("Finish(fence %d, a1) over the record re-driven by %s: err = %v, want ErrFenced",
						p.Fence, redrive.attempt, err)
				}
				if got := mustGet(t, st, key); !reflect.DeepEqual(got, taken) {
					t.Fatalf("the re-driven record changed: %+v, want %+v", got, taken)
				}
			}
			// Released: absent, fenced.
			p := finishParams(old, idem.StateSucceeded, "r")
			p.Claim = old
			if err := st.Release(ctx, idem.ReleaseParams{Scope: old.Scope, Key: old.Key, Fence: 1, AttemptID: "a1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Finish(ctx, p); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("Finish of a released claim: err = %v, want ErrFenced", err)
			}
		})
	}
}

// TestFinishKnownTakesTheClaim: the one-UPDATE path applies to the claims
// the engine really holds (with or without intent and lease, at any time
// zone and precision, after an unknown mark), and not to a hint that is
// not this attempt's claim or to an unknown outcome.
func TestFinishKnownTakesTheClaim(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	local := time.FixedZone("UTC+3", 3*3600)
	for i, tc := range []struct {
		claim func(p *idem.ClaimParams)
		hint  func(c *idem.Record) // the same record as the caller may hold it
	}{
		{func(*idem.ClaimParams) {}, func(*idem.Record) {}},
		{func(p *idem.ClaimParams) { p.Intent = nil }, func(*idem.Record) {}},
		{func(p *idem.ClaimParams) { p.Intent = []byte{} }, func(c *idem.Record) { c.Intent = []byte{} }},
		{func(p *idem.ClaimParams) { p.LeaseUntil = time.Time{} }, func(*idem.Record) {}},
		{func(p *idem.ClaimParams) {
			p.Now = time.Date(2025, 3, 1, 15, 0, 0, 123456789, local)
			p.LeaseUntil = p.Now.Add(time.Minute + 999*time.Nanosecond)
		}, func(c *idem.Record) {
			c.CreatedAt = c.CreatedAt.In(local).Add(999 * time.Nanosecond)
			c.LeaseUntil = c.LeaseUntil.In(local).Add(1)
		}},
	} {
		cp := claimParams("k"+string(rune('a'+i)), "a1")
		tc.claim(&cp)
		claim := mustClaim(t, s, cp).Record
		if i == 0 {
			mustFinish(t, s, finishParams(claim, idem.StateUnknown, ""))
		}
		p := finishParams(claim, idem.StateFailed, "")
		p.CompletedAt = time.Date(2025, 3, 1, 16, 0, 0, 987654321, local)
		p.ExpiresAt = p.CompletedAt.Add(time.Hour + 1)
		p.Claim = claim
		tc.hint(&p.Claim)
		rec, err := s.ops().finishKnown(ctx, p)
		if err != nil || rec == nil {
			t.Fatalf("case %d: finishKnown = %v, %v; want the record", i, rec, err)
		}
		if got := mustGet(t, s, cp.Key); !reflect.DeepEqual(rec, got) {
			t.Fatalf("case %d: finishKnown returned\n %+v\nstored\n %+v", i, rec, got)
		}
	}
	claim := mustClaim(t, s, claimParams("other", "a1")).Record
	for name, p := range map[string]idem.FinishParams{
		"no hint": finishParams(claim, idem.StateSucceeded, "x"),
		"unknown": func() idem.FinishParams { p := finishParams(claim, idem.StateUnknown, ""); p.Claim = claim; return p }(),
		"another key": func() idem.FinishParams {
			p := finishParams(claim, idem.StateSucceeded, "x")
			p.Claim = claim
			p.Claim.Key = "k"
			return p
		}(),
		"another scope": func() idem.FinishParams {
			p := finishParams(claim, idem.StateSucceeded, "x")
			p.Claim = claim
			p.Claim.Scope = "s"
			return p
		}(),
		"another fence": func() idem.FinishParams {
			p := finishParams(claim, idem.StateSucceeded, "x")
			p.Claim = claim
			p.Claim.Fence = 2
			return p
		}(),
		"another attempt": func() idem.FinishParams {
			p := finishParams(claim, idem.StateSucceeded, "x")
			p.Claim = claim
			p.Claim.AttemptID = "a2"
			return p
		}(),
	} {
		if rec, err := s.ops().finishKnown(ctx, p); rec != nil || err != nil {
			t.Fatalf("%s: finishKnown = %+v, %v; want no fast path", name, rec, err)
		}
	}
	if got := mustGet(t, s, "other"); got.State != idem.StateInProgress {
		t.Fatalf("a refused fast path wrote: %+v", got)
	}
}
