package mysqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestClaimRaceOneWinnerPerKey has 64 goroutines claim the same keys, each
// in its own shuffled order, so that most claims are duplicates racing an
// INSERT that has not committed yet (the read-after-duplicate path).
// Every key must be claimed exactly once and no call may fail.
func TestClaimRaceOneWinnerPerKey(t *testing.T) {
	f := newFixture(t)
	const goroutines, nkeys = 64, 60
	var wins [nkeys]atomic.Int32
	var failures atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			order := rand.Perm(nkeys)
			for _, k := range order {
				p := claimParams(fmt.Sprintf("race-%d", k), fmt.Sprintf("g%d", g), t0)
				res, err := f.st.Claim(context.Background(), p)
				if err != nil {
					t.Errorf("goroutine %d key %d: %v", g, k, err)
					failures.Add(1)
					continue
				}
				if res.Claimed {
					wins[k].Add(1)
				} else if res.Record.Fence != 1 || res.Record.State != idem.StateInProgress || res.Record.AttemptID == p.AttemptID {
					t.Errorf("duplicate got %+v", res.Record)
				}
			}
		})
	}
	wg.Wait()
	for k := range wins {
		if n := wins[k].Load(); n != 1 {
			t.Errorf("key %d claimed %d times, want 1", k, n)
		}
	}
	if n := countRows(t, f.db, f.table); n != nkeys {
		t.Fatalf("%d rows, want %d", n, nkeys)
	}
}

// TestClaimRaceWithReleases races claims against owners that release and
// re-claim, and against re-claims of expired records: the paths where the
// row disappears or changes between the INSERT and the read. At any moment
// at most one attempt may believe it holds a key.
func TestClaimRaceWithReleases(t *testing.T) {
	f := newFixture(t)
	const goroutines, nkeys, rounds = 32, 8, 40
	var holders [nkeys]atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx := context.Background()
			for i := range rounds {
				k := rand.IntN(nkeys)
				attempt := fmt.Sprintf("g%d-%d", g, i)
				// Late clocks make succeeded records expired for some callers.
				now := t0.Add(time.Duration(i) * time.Hour)
				res, err := f.st.Claim(ctx, claimParams(fmt.Sprintf("k%d", k), attempt, now))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if !res.Claimed {
					continue
				}
				if n := holders[k].Add(1); n != 1 {
					t.Errorf("key %d held by %d attempts at once", k, n)
				}
				holders[k].Add(-1) // give up the claim before writing
				if i%2 == 0 {
					err = f.st.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: res.Record.Key, Fence: res.Record.Fence, AttemptID: attempt})
				} else {
					_, err = f.st.Finish(ctx, succeed(res.Record.Key, attempt, res.Record.Fence, "ok", now))
				}
				if err != nil {
					t.Errorf("outcome: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
