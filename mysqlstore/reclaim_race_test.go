package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestReclaimRechecksExpiry: a claim that read an expired outcome takes it
// over with a second statement, and in between the row can be swept and
// claimed afresh — at fence 1 again, so the fence the claim read still
// matches — and finished, not expired. The take-over re-checks state and
// expiry on the row it writes, so the claim answers the fresh outcome
// instead of taking it over (and running a second effect over it). The
// sweep and the fresh claim run in that gap through a hook on the
// statement, not by timing.
func TestReclaimRechecksExpiry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := mustClaim(t, f.st, claimParams("k", "first", t0))
	if _, err := f.st.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "k", Fence: c.Record.Fence, AttemptID: "first",
		State: idem.StateSucceeded, Result: []byte("old"), CompletedAt: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(10 * time.Minute) // the old outcome expired at t0+1m
	raced := false
	st := f.st.BeforeReclaim(func() {
		if raced {
			return // the race runs once
		}
		raced = true
		if _, err := f.db.ExecContext(ctx, "DELETE FROM `"+f.table+"` WHERE scope = 'tenant-1' AND `key` = 'k'"); err != nil {
			t.Error(err)
		}
		fresh := mustClaim(t, f.st, claimParams("k", "fresh", later))
		if _, err := f.st.Finish(ctx, succeed("k", "fresh", fresh.Record.Fence, "new", later)); err != nil {
			t.Error(err)
		}
	})
	st.PinClaimPath(false) // the INSERT-first path: the one that reads, then takes over
	res, err := st.Claim(ctx, claimParams("k", "second", later))
	if err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the claim never tried to take the record over: the test tested nothing")
	}
	if res.Claimed || res.Record.AttemptID != "fresh" || string(res.Record.Result) != "new" {
		t.Fatalf("claim after the row was swept and claimed afresh = %+v; want the fresh outcome, not Claimed", res)
	}
}
