package bench

import (
	"context"
	"sync/atomic"
	"testing"
)

// A worker that first runs after its slice is over (what a loaded machine
// does to a 5 ms warm-up or a 50 ms slice) still measures a request: a
// duration that has passed before any goroutine starts gives conc
// requests, not an empty cell. Before, TestRunMemoryAndSQLite saw an
// empty storm cell under a CPU hog.
func TestRunForMeasuresAtLeastOneRequestPerWorker(t *testing.T) {
	var seq atomic.Int64
	var calls atomic.Int64
	f := func(context.Context, int64) (outcome, error) { calls.Add(1); return outFirst, nil }
	for _, conc := range []int{1, 2, 8} {
		calls.Store(0)
		r, err := runFor(context.Background(), conc, 0, &seq, f)
		if err != nil {
			t.Fatal(err)
		}
		if r.ops != int64(conc) || calls.Load() != int64(conc) || r.outcomes[outFirst] != int64(conc) {
			t.Errorf("conc %d, a slice already over: %d ops (%d calls), want %d", conc, r.ops, calls.Load(), conc)
		}
	}
}
