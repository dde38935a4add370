package bench

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// SweepLoadResult is what the sweep-under-load run measured: first-time
// requests from 16 callers before, while and after the sweeper deleted
// Records expired records.
type SweepLoadResult struct {
	Records   int64         `json:"records"`
	Deleted   int           `json:"deleted"`
	BatchSize int           `json:"batch_size"`
	MaxRate   float64       `json:"max_rate,omitempty"`
	Batches   int           `json:"batches"`
	Took      time.Duration `json:"took_ns"`
	// RowsPerSec is Deleted over Took.
	RowsPerSec float64 `json:"rows_per_sec"`
	Before     Cell    `json:"before"`
	During     Cell    `json:"during"`
	After      Cell    `json:"after"`
}

// sweepLoadCallers is how many callers make first-time requests meanwhile.
const sweepLoadCallers = 16

// sweepBatch is the sweeper's batch size in the run (the Sweeper default).
const sweepBatch = 1000

// runSweepUnderLoad loads opt.SweepUnderLoad expired records into idem's
// side, measures first-time requests for opt.Duration, then again for as
// long as a sweeper (batches of sweepBatch, opt.SweepRate) takes to delete
// them, then once more for opt.Duration.
func runSweepUnderLoad(ctx context.Context, w *workload, t *target, st idem.Store, opt Options, pr *progress) (*SweepLoadResult, error) {
	if t.prefill == nil {
		return nil, fmt.Errorf("bench: --sweep-under-load: no loader for %s", t.scheme)
	}
	n := opt.SweepUnderLoad
	start, last := time.Now(), time.Time{}
	err := t.prefill(ctx, st, prefillSpec{expired: true, idemOnly: true}, 0, n, w.payload, func(side string, done int64) {
		if time.Since(last) >= time.Second || done == n {
			last = time.Now()
			pr.line("prefill %s: %d/%d expired records (%.0f/s)", side, done, n, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	res := &SweepLoadResult{Records: n, BatchSize: sweepBatch, MaxRate: opt.SweepRate}
	var seq atomic.Int64
	phase := func(name string, until func() bool) (Cell, error) {
		op := w.opFor(ScenarioFirst, sideIdem, "sweepload-"+name+"-")
		acc := &cellResult{}
		for first := true; first || !until(); first = false {
			pr.line("sweep under load: %s, %d requests so far", name, acc.ops)
			r, err := runFor(ctx, sweepLoadCallers, sliceLen, &seq, op)
			if err != nil {
				return Cell{}, err
			}
			acc.add(r)
		}
		c := toCell("sweep-"+name, sideIdem, sweepLoadCallers, acc)
		return c, nil
	}
	timed := func() func() bool {
		end := time.Now().Add(opt.Duration)
		return func() bool { return !time.Now().Before(end) }
	}
	if res.Before, err = phase("before", timed()); err != nil {
		return nil, err
	}
	var done atomic.Bool
	type sweepEnd struct {
		n   int
		err error
	}
	ended := make(chan sweepEnd, 1)
	sw := idem.NewSweeper(st, idem.SweeperConfig{BatchSize: sweepBatch, MaxRate: opt.SweepRate,
		OnBatch: func(int) { res.Batches++ }})
	sweepStart := time.Now()
	go func() {
		n, err := sw.RunOnce(ctx)
		res.Took = time.Since(sweepStart)
		done.Store(true)
		ended <- sweepEnd{n, err}
	}()
	res.During, err = phase("during", done.Load)
	end := <-ended
	if err != nil {
		return nil, err
	}
	if end.err != nil {
		return nil, fmt.Errorf("bench: sweep: %w", end.err)
	}
	res.Deleted = end.n
	res.RowsPerSec = float64(end.n) / res.Took.Seconds()
	if res.After, err = phase("after", timed()); err != nil {
		return nil, err
	}
	return res, nil
}

func writeSweepLoad(w io.Writer, r *SweepLoadResult) error {
	if r == nil {
		return nil
	}
	limit := "no rate cap"
	if r.MaxRate > 0 {
		limit = fmt.Sprintf("at most %s records/s", rate(r.MaxRate))
	}
	fmt.Fprintf(w, "\nsweep under load — %d expired records swept (batches of %d, %s) while %d callers make first-time requests\n",
		r.Records, r.BatchSize, limit, sweepLoadCallers)
	fmt.Fprintf(w, "  sweep    deleted %d in %s, %d batches: %s records/s\n", r.Deleted, r.Took.Round(time.Millisecond), r.Batches, rate(r.RowsPerSec))
	base := (r.Before.P99 + r.After.P99) / 2
	for _, c := range []struct {
		name string
		cell Cell
	}{{"before", r.Before}, {"during", r.During}, {"after", r.After}} {
		fmt.Fprintf(w, "  %-7s  %s/s  p50 %s  p99 %s  (p99 %.2f× the mean of before and after)\n", c.name, rate(c.cell.OpsPerSec),
			msString(c.cell.P50), msString(c.cell.P99), c.cell.P99/base)
	}
	return nil
}
