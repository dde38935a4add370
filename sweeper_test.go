package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// put writes a record in state st directly on the store: terminal records
// expire at exp, in_progress ones hold a lease that passed long ago.
func put(t *testing.T, st *memstore.Store, key string, state idem.State, exp time.Time) {
	t.Helper()
	ctx := context.Background()
	created := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	cr, err := st.Claim(ctx, idem.ClaimParams{Key: key, AttemptID: "a-" + key, Now: created, LeaseUntil: created.Add(time.Minute)})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim %s: %+v, %v", key, cr, err)
	}
	if state == idem.StateInProgress {
		return
	}
	p := idem.FinishParams{Key: key, Fence: cr.Record.Fence, AttemptID: "a-" + key, State: state, CompletedAt: created}
	if state.Terminal() {
		p.Result, p.ExpiresAt = []byte("v"), exp.UTC().Truncate(time.Microsecond)
	}
	if _, err := st.Finish(ctx, p); err != nil {
		t.Fatalf("finish %s: %v", key, err)
	}
}

func present(t *testing.T, st *memstore.Store, key string) bool {
	t.Helper()
	_, err := st.Get(context.Background(), "", key)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSweeperRunOnceDrainsEveryBatch: with BatchSize 2, one RunOnce removes
// all five expired records (batches of 2, 2, 1) and reports 5.
func TestSweeperRunOnceDrainsEveryBatch(t *testing.T) {
	st := memstore.New()
	now := time.Now()
	for i := range 5 {
		put(t, st, fmt.Sprint("exp", i), idem.StateSucceeded, now.Add(-time.Hour))
	}
	var progress []int
	sw := idem.NewSweeper(st, idem.SweeperConfig{BatchSize: 2, Clock: func() time.Time { return now },
		OnBatch: func(sofar int) { progress = append(progress, sofar) }})
	n, err := sw.RunOnce(context.Background())
	if err != nil || n != 5 {
		t.Fatalf("RunOnce = %d, %v; want 5 deleted", n, err)
	}
	if fmt.Sprint(progress) != "[2 4 5]" {
		t.Fatalf("OnBatch saw %v, want [2 4 5] (deleted so far after each batch)", progress)
	}
	for i := range 5 {
		if k := fmt.Sprint("exp", i); present(t, st, k) {
			t.Fatalf("%s survived the sweep", k)
		}
	}
	if n, err := sw.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("second RunOnce = %d, %v; want 0", n, err)
	}
}

// TestSweeperJudgesExpiryByItsClock: the sweeper judges expiry at its
// injected Clock, not the wall clock: with the clock ahead, records that
// expire later today are swept; with it behind, records that expired an
// hour ago by the wall clock survive. Unknown and in_progress records
// (even with a lease long passed) survive every sweep.
func TestSweeperJudgesExpiryByItsClock(t *testing.T) {
	wall := time.Now()
	for _, tc := range []struct {
		name  string
		clock time.Time
		gone  []string // swept at clock
		kept  []string
	}{
		// laterToday expires in an hour of wall time; lastHour an hour ago.
		{"ahead", wall.Add(48 * time.Hour), []string{"laterToday", "lastHour", "beforeClock"}, []string{"afterClock"}},
		{"behind", wall.Add(-48 * time.Hour), []string{"beforeClock"}, []string{"laterToday", "lastHour", "afterClock"}},
	} {
		st := memstore.New()
		put(t, st, "laterToday", idem.StateSucceeded, wall.Add(time.Hour))
		put(t, st, "lastHour", idem.StateFailed, wall.Add(-time.Hour))
		put(t, st, "afterClock", idem.StateSucceeded, tc.clock.Add(time.Hour))
		put(t, st, "beforeClock", idem.StateFailed, tc.clock.Add(-time.Hour))
		put(t, st, "unknown", idem.StateUnknown, time.Time{})
		put(t, st, "running", idem.StateInProgress, time.Time{})
		sw := idem.NewSweeper(st, idem.SweeperConfig{BatchSize: 2, Clock: func() time.Time { return tc.clock }})
		n, err := sw.RunOnce(context.Background())
		if err != nil || n != len(tc.gone) {
			t.Fatalf("%s: RunOnce = %d, %v; want %d (%v)", tc.name, n, err, len(tc.gone), tc.gone)
		}
		for _, k := range tc.gone {
			if present(t, st, k) {
				t.Errorf("%s: %s (expired at the sweeper's clock) survived", tc.name, k)
			}
		}
		for _, k := range append(tc.kept, "unknown", "running") {
			if !present(t, st, k) {
				t.Errorf("%s: %s was swept", tc.name, k)
			}
		}
	}
	// Far in the future, unknown and in_progress records still survive.
	st := memstore.New()
	put(t, st, "unknown", idem.StateUnknown, time.Time{})
	put(t, st, "running", idem.StateInProgress, time.Time{})
	put(t, st, "done", idem.StateSucceeded, wall)
	far := wall.AddDate(100, 0, 0)
	n, err := idem.NewSweeper(st, idem.SweeperConfig{Clock: func() time.Time { return far }}).RunOnce(context.Background())
	if err != nil || n != 1 || present(t, st, "done") || !present(t, st, "unknown") || !present(t, st, "running") {
		t.Fatalf("sweep in a hundred years = %d, %v; want only the succeeded record deleted", n, err)
	}
}

// TestSweeperMaxRatePacesBatches: with MaxRate, RunOnce still deletes
// everything in BatchSize batches, and takes at least as long as the rate
// allows (a lower bound only: waiting is never shorter than asked, however
// loaded the machine). Without it the same sweep takes no such time.
func TestSweeperMaxRatePacesBatches(t *testing.T) {
	st := memstore.New()
	past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 250 {
		put(t, st, fmt.Sprintf("k%03d", i), idem.StateSucceeded, past)
	}
	var batches []int
	sw := idem.NewSweeper(st, idem.SweeperConfig{BatchSize: 50, MaxRate: 1000,
		OnBatch: func(n int) { batches = append(batches, n) }})
	start := time.Now()
	n, err := sw.RunOnce(context.Background())
	took := time.Since(start)
	if err != nil || n != 250 {
		t.Fatalf("RunOnce = %d, %v; want 250", n, err)
	}
	if fmt.Sprint(batches) != "[50 100 150 200 250 250]" {
		t.Fatalf("batches %v, want 50 at a time", batches)
	}
	// The fifth full batch may start once 200 records at 1000/s allow it.
	if took < 200*time.Millisecond {
		t.Fatalf("250 records at MaxRate 1000/s took %s, want at least 200ms", took)
	}
	// A cancelled context ends the wait with its error.
	for i := range 100 {
		put(t, st, fmt.Sprintf("c%03d", i), idem.StateSucceeded, past)
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow := idem.NewSweeper(st, idem.SweeperConfig{BatchSize: 10, MaxRate: 1,
		OnBatch: func(int) { cancel() }})
	if n, err := slow.RunOnce(ctx); !errors.Is(err, context.Canceled) || n != 10 {
		t.Fatalf("cancelled paced RunOnce = %d, %v; want 10 and context.Canceled", n, err)
	}
}
