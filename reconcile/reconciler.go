package reconcile

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// Reconciler compares local records with a provider's view, by forwarded
// key, in both directions. It is safe for concurrent use, but runs are meant
// to be serial: RunOnce and a started loop should not overlap on one store.
type Reconciler struct {
	eng   *idem.Engine
	store idem.Store
	prov  Provider
	cfg   Config

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a reconciler that reads and writes eng's store, resolves
// unknown records through eng (so resolutions are logged and fenced), and
// asks prov.
func New(eng *idem.Engine, prov Provider, cfg Config) (*Reconciler, error) {
	if eng == nil || prov == nil {
		return nil, errors.New("reconcile: New: engine and provider are required")
	}
	if err := cfg.fill(eng); err != nil {
		return nil, err
	}
	return &Reconciler{eng: eng, store: eng.Store(), prov: prov, cfg: cfg}, nil
}

// run is the state of one RunOnce.
type run struct {
	now  time.Time
	rep  *Report
	seen map[string]string // forward key → "scope\x00key" of the local record
	// looked holds the forward keys this run asked the provider about
	// (a record marked reconciled by an earlier run is not asked again).
	looked map[string]bool
	// unreadable counts local records whose intent could not be read
	// (not decryptable, or not an intent): their forward keys are not in
	// seen, so the provider pass cannot tell their entries from orphans.
	unreadable int
}

// RunOnce reconciles every local record created before now, batch by batch,
// then looks for provider entries with no local record. It returns the
// report, complete for the keys it reached, and an error only when the store
// or the provider's listing failed (per-key problems are in Report.Errors).
func (r *Reconciler) RunOnce(ctx context.Context) (*Report, error) {
	ru := &run{now: r.now(), seen: map[string]string{}, looked: map[string]bool{}}
	ru.rep = newReport(ru.now)
	if rs, ok := r.prov.(RowSkipper); ok {
		for _, g := range rs.SkippedRows() {
			g.Lines = slices.Clone(g.Lines)
			ru.rep.SkippedRows = append(ru.rep.SkippedRows, g)
		}
	}
	err := r.localPass(ctx, ru)
	if err == nil {
		err = r.providerPass(ctx, ru)
	}
	if err != nil {
		ru.rep.Error = err.Error()
	}
	ru.rep.finish(r.now())
	r.cfg.Logger.Info("reconcile: run", "checked", ru.rep.Checked, "counts", ru.rep.Counts,
		"drift_count", ru.rep.DriftCount, "errors", len(ru.rep.Errors), "err", err)
	if r.cfg.OnRun != nil {
		r.cfg.OnRun(ru.rep, err)
	}
	return ru.rep, err
}

func (r *Reconciler) now() time.Time { return r.cfg.Clock().UTC().Truncate(time.Microsecond) }

func (r *Reconciler) localPass(ctx context.Context, ru *run) error {
	var after *idem.Cursor
	for {
		recs, err := r.store.List(ctx, idem.ListFilter{Scope: r.cfg.Scope, CreatedBefore: ru.now.Add(time.Microsecond),
			Limit: r.cfg.BatchSize, After: after})
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if err := ctx.Err(); err != nil {
				return err
			}
			ru.rep.Checked++
			r.check(ctx, ru, rec)
		}
		if r.cfg.OnProgress != nil {
			r.cfg.OnProgress(ru.rep.Checked)
		}
		if len(recs) == 0 || len(recs) < r.cfg.BatchSize {
			return nil
		}
		last := recs[len(recs)-1]
		after = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
	}
}

// Start runs RunOnce every Interval until Stop or ctx ends. Starting a
// running reconciler is an error.
func (r *Reconciler) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("reconcile: reconciler already started")
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			_, _ = r.RunOnce(ctx) // reported through the log and OnRun
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop stops a started reconciler and waits for its current run to end.
func (r *Reconciler) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
