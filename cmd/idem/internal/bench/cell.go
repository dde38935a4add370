package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is how one request ended, for the per-cell counts.
type outcome uint8

const (
	outFirst    outcome = iota // the effect ran (raw: the insert won)
	outReplay                  // a recorded outcome was returned (raw: a read)
	outConflict                // an in-flight duplicate was turned away
	numOutcomes
)

// op performs request number n of a cell.
type op func(ctx context.Context, n int64) (outcome, error)

// cellResult is what one cell measured.
type cellResult struct {
	ops      int64
	elapsed  time.Duration
	hist     hist
	outcomes [numOutcomes]int64
	// use is what the metered slices cost the server, usedOps their
	// requests; metered marks a slice that was metered.
	use     usage
	usedOps int64
	metered bool
}

// add accumulates o, one slice of the same cell, into r. A cell is
// metered only when every slice of it was.
func (r *cellResult) add(o *cellResult) {
	if o.metered && (r.usedOps > 0 || r.ops == 0) && r.use != unmeasured {
		r.use.add(o.use)
		r.usedOps += o.ops
	} else {
		r.use, r.usedOps = unmeasured, 0
	}
	r.ops += o.ops
	r.elapsed += o.elapsed
	r.hist.merge(&o.hist)
	for i, n := range o.outcomes {
		r.outcomes[i] += n
	}
}

// runFor runs op from conc goroutines for dur. The first error stops it.
// Each goroutine makes at least one request, checking the deadline only
// after each: on a loaded machine a goroutine may first run after dur has
// passed, and a cell whose goroutines all did would hold no request at all
// (an "empty" cell, no rate, no ratio) rather than a slow one.
func runFor(ctx context.Context, conc int, dur time.Duration, seq *atomic.Int64, f op) (*cellResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]cellResult, conc)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for w := range conc {
		wg.Add(1)
		go func(r *cellResult) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				out, err := f(ctx, seq.Add(1))
				if err != nil {
					if ctx.Err() == nil {
						cancel(err)
					}
					return
				}
				t1 := time.Now()
				r.hist.add(t1.Sub(t0))
				r.ops++
				r.outcomes[out]++
				if !t1.Before(deadline) {
					return
				}
			}
		}(&results[w])
	}
	wg.Wait()
	total := &cellResult{elapsed: time.Since(start)}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	for i := range results {
		total.ops += results[i].ops
		total.hist.merge(&results[i].hist)
		for o, n := range results[i].outcomes {
			total.outcomes[o] += n
		}
	}
	return total, nil
}
