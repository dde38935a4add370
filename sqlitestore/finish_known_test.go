package sqlitestore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
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

// TestFinishWithClaim runs the hint checks of the conformance suite on each
// kind of store: the one-UPDATE finish builds its record from the claim,
// and that record must be the stored one however the record moved on, with
// every write still fenced.
func TestFinishWithClaim(t *testing.T) {
	for _, kind := range finishKnownStores {
		t.Run(kind.name, func(t *testing.T) {
			storetest.FinishWithClaim(t, kind.open(t), "tenant-1", t0)
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
