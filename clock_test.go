package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestSweeperJudgesOnTheStoresClock: with its default clock the sweeper
// judges expiry at the store's time, not this host's: a record the store's
// clock finds expired is swept though this host's clock, 25h behind, does
// not find it so.
func TestSweeperJudgesOnTheStoresClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &clocked{Store: memstore.New(), skew: 25 * time.Hour}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.Claim(ctx, idem.ClaimParams{Scope: "s", Key: "k", AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, idem.FinishParams{Scope: "s", Key: "k", Fence: 1, AttemptID: "a", State: idem.StateSucceeded,
		CompletedAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	n, err := idem.NewSweeper(st, idem.SweeperConfig{}).RunOnce(ctx)
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want the record expired on the store's clock swept", n, err)
	}
	st.set(0, true)
	if _, err := idem.NewSweeper(st, idem.SweeperConfig{}).RunOnce(ctx); err == nil {
		t.Fatal("a sweep without the store's clock succeeded; want it to fail rather than judge on this host's")
	}
}

// TestHeartbeatOnTheHostsClock: leases are on the store's clock, but the
// heartbeat is scheduled on this host's: an engine an hour behind its
// store still beats a third of the lease after the claim, and its long
// effect stays in progress for others.
func TestHeartbeatOnTheHostsClock(t *testing.T) {
	t.Parallel()
	st := &clocked{Store: memstore.New(), skew: time.Hour}
	beat := make(chan struct{}, 1)
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventStore && ev.StoreOp == "heartbeat" && ev.Err == nil {
			select {
			case beat <- struct{}{}:
			default:
			}
		}
	})
	e, err := idem.New(st, idem.Config{Lease: 300 * time.Millisecond, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.DoBytes(context.Background(), idem.Request{Key: "long"}, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
		select {
		case <-beat:
			return []byte("ok"), nil
		case <-time.After(20 * time.Second):
			t.Error("no heartbeat within 20s of a 300ms lease")
			return nil, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
