package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestClaimOnEachPath runs the claim's decisions on both of its paths,
// pinned: read-first (a plain SELECT answers a live record) and
// INSERT-first (the primary key refuses, then the record is read). Which
// path a claim takes depends on the mix of recent claims, so a suite that
// does not pin it tests one path or the other as it happens. On each:
// a live in-progress record and an unexpired outcome are returned, never
// re-claimed (no take-over is even sent for them); an outcome at its
// expiry is re-claimed under the next fence; an unknown record is never
// re-claimed.
func TestClaimOnEachPath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var takeovers int
	st := f.st.BeforeReclaim(func() { takeovers++ })
	for _, readFirst := range []bool{true, false} {
		path := map[bool]string{true: "read-first", false: "insert-first"}[readFirst]
		claim := func(key, attempt string, now time.Time) idem.ClaimResult {
			t.Helper()
			st.PinClaimPath(readFirst)
			return mustClaim(t, st, claimParams(key, attempt, now))
		}
		takeovers = 0
		k := fmt.Sprintf("k-%s", path)
		claim(k, "a1", t0)
		if res := claim(k, "a2", t0.Add(time.Second)); res.Claimed || res.Record.AttemptID != "a1" || res.Record.Fence != 1 {
			t.Fatalf("%s: claim of a live in-progress record = %+v; want a1's record, not Claimed", path, res)
		}
		fin := succeed(k, "a1", 1, "ok", t0)
		if _, err := f.st.Finish(ctx, fin); err != nil {
			t.Fatal(err)
		}
		if res := claim(k, "a3", fin.ExpiresAt.Add(-time.Microsecond)); res.Claimed || res.Record.State != idem.StateSucceeded || res.Record.Fence != 1 {
			t.Fatalf("%s: claim just before expiry = %+v; want the recorded outcome, not Claimed", path, res)
		}
		if takeovers != 0 {
			t.Fatalf("%s: %d take-overs sent for live records; want none", path, takeovers)
		}
		if res := claim(k, "a4", fin.ExpiresAt); !res.Claimed || res.Record.Fence != 2 || res.Record.AttemptID != "a4" {
			t.Fatalf("%s: claim at expiry = %+v; want Claimed at fence 2", path, res)
		}
		u := k + "-unknown"
		claim(u, "a1", t0)
		if _, err := f.st.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: u, Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if res := claim(u, "a2", t0.Add(1000*time.Hour)); res.Claimed || res.Record.State != idem.StateUnknown {
			t.Fatalf("%s: claim of an unknown record = %+v; want it returned, not Claimed", path, res)
		}
		if takeovers != 1 {
			t.Fatalf("%s: %d take-overs sent; want one, for the expired outcome", path, takeovers)
		}
	}
}
