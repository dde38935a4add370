package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Claim is atomic: between its read of the record and its write nothing
// else runs on the store. The test stops the first claim at that point
// (claimGap) and, if the store's lock is free there, runs a competing claim
// of the same key in the gap, as the scheduler could. Exactly one of the
// two may own the key. Deterministic: no timing, no retries.
func TestClaimIsAtomicAcrossReadAndWrite(t *testing.T) {
	s := New()
	ctx := context.Background()
	now := time.Now()
	params := func(attempt string) idem.ClaimParams {
		return idem.ClaimParams{Key: "k", Fingerprint: idem.NewFingerprint([]byte("x")), AttemptID: attempt,
			Now: now, LeaseUntil: now.Add(time.Minute)}
	}
	var competitor *idem.ClaimResult
	s.claimGap = func() {
		if competitor != nil || !s.mu.TryLock() {
			return // the claim holds the lock across the gap: nothing interleaves
		}
		s.mu.Unlock()
		s.claimGap = nil
		r, err := s.Claim(ctx, params("competitor"))
		if err != nil {
			t.Fatal(err)
		}
		competitor = &r
	}
	first, err := s.Claim(ctx, params("first"))
	if err != nil {
		t.Fatal(err)
	}
	if competitor != nil && competitor.Claimed && first.Claimed {
		t.Fatalf("two claims own key k (attempts %q and %q): the claim let go of its lock between reading and writing the record",
			competitor.Record.AttemptID, first.Record.AttemptID)
	}
	if !first.Claimed {
		t.Fatalf("the only claim did not own the key: %+v", first)
	}
}
