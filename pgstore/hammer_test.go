package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestHammerClaim drives 64 goroutines through the same 1,000 keys with
// Claim and Finish. Each key must be claimed exactly once, and no call may
// fail: in particular the snapshot trap (a claim that waited for a
// concurrent inserter and then sees no row) must be absorbed by Claim.
func TestHammerClaim(t *testing.T) {
	t.Parallel()
	const goroutines = 64
	keys := 1000
	if testing.Short() {
		keys = 200 // the full run takes 10-50 s on a busy two-core machine
	}
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	claims := make([]atomic.Int32, keys)
	var errs atomic.Int64
	var firstErr atomic.Value
	trapsBefore := pgstore.NoRowRounds()

	var start, wg sync.WaitGroup
	start.Add(1)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			order := keyOrder(g, keys)
			for _, k := range order {
				if err := hammerOne(ctx, s, g, k, &claims[k]); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	start.Done()
	wg.Wait()

	if n := errs.Load(); n > 0 {
		t.Fatalf("%d calls failed; first: %v", n, firstErr.Load())
	}
	for k := range claims {
		if n := claims[k].Load(); n != 1 {
			t.Errorf("key %d claimed %d times, want 1", k, n)
		}
	}
	t.Logf("claim statements that returned no row and were retried: %d", pgstore.NoRowRounds()-trapsBefore)
}

// keyOrder makes most goroutines walk the keys in the same order, so that
// they collide on each key at the same moment (the snapshot trap needs a
// claim that waits for a concurrent insert), and a few in random order.
func keyOrder(g, keys int) []int {
	order := make([]int, keys)
	for i := range order {
		order[i] = i
	}
	if g%4 == 3 {
		r := rand.New(rand.NewPCG(uint64(g), 1))
		r.Shuffle(keys, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

func hammerOne(ctx context.Context, s idem.Store, g, k int, claims *atomic.Int32) error {
	p := claimParams(fmt.Sprintf("key-%04d", k), fmt.Sprintf("g%02d-k%04d", g, k), t0)
	res, err := s.Claim(ctx, p)
	if err != nil {
		return err
	}
	if !res.Claimed {
		return nil
	}
	claims.Add(1)
	_, err = s.Finish(ctx, succeed(res, "done", t0.Add(time.Millisecond), time.Hour))
	return err
}
