package storetest_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// checkThenInsert is the red flag from the field guide: it asks "does the
// key exist?" and inserts on a separate step, as a table without a unique
// constraint lets it. Between the two steps another caller does the same.
type checkThenInsert struct {
	*memstore.Store
}

func (c checkThenInsert) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if rec, err := c.Get(ctx, p.Scope, p.Key); err == nil && !rec.Expired(p.Now) {
		return idem.ClaimResult{Record: *rec, Claimed: rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID}, nil
	}
	runtime.Gosched() // the window every network round trip opens
	// Insert, overwriting a row a concurrent caller may have inserted.
	if old, err := c.Get(ctx, p.Scope, p.Key); err == nil {
		_, _ = c.Resolve(ctx, idem.ResolveParams{Scope: p.Scope, Key: p.Key, From: []idem.State{old.State}, Release: true})
	}
	r, err := c.Store.Claim(ctx, p)
	r.Claimed = true // the insert "succeeded"
	return r, err
}

// TestSuiteDetectsCheckThenInsert is the constraint evidence: with the
// atomic claim replaced by check-then-insert, the suite's race finds
// duplicate effects. If it ever finds none, the suite has lost its teeth.
func TestSuiteDetectsCheckThenInsert(t *testing.T) {
	var extra int
	for round := 0; round < 5 && extra == 0; round++ {
		extra = storetest.RaceEffects(t, checkThenInsert{memstore.New()}, 64, 50)
	}
	if extra == 0 {
		t.Fatal("the race found no duplicates against a check-then-insert store: the suite cannot fail")
	}
	t.Logf("check-then-insert store: %d duplicate effects detected", extra)
	if real := storetest.RaceEffects(t, memstore.New(), 64, 50); real != 0 {
		t.Fatalf("the real store ran %d duplicate effects", real)
	}
}

// mixedErrors fails claims with errors of two different types, as a broken
// store under a race does; Race must count them, not crash.
type mixedErrors struct {
	*memstore.Store
	n atomic.Int64
}

type otherErr struct{}

func (otherErr) Error() string { return "other" }

func (m *mixedErrors) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if m.n.Add(1)%2 == 0 {
		return idem.ClaimResult{}, otherErr{}
	}
	return idem.ClaimResult{}, errors.New("plain")
}

func TestRaceCountsErrorsOfAnyType(t *testing.T) {
	rep := storetest.Race(t, &mixedErrors{Store: memstore.New()}, 4, 5)
	if rep.Errors != 20 || rep.FirstErr == nil || rep.Missing != 5 {
		t.Fatalf("report = %+v, want 20 errors, 5 keys never run", rep)
	}
}
