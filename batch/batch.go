// Package batch runs batch and cron jobs item by item under an
// [idem.Engine], so that a re-run after a crash skips the items already
// applied and reports the ones whose outcome is unknown instead of applying
// them twice.
//
// Each item is keyed "<job>:v<version>:<run>:<item>" (see [idem.DeriveKey]),
// for example "fees:v1:2024-06-01:acct-42": the run names the period the job
// covers (a date, not the time it started), so every re-run of the same
// period meets the same keys. Bump the version when the item's meaning
// changes. The item's payload is fingerprinted: the same item id with other
// content is reported as a mismatch, not skipped.
package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/idemkit/idem"
)

// Job describes one run of a batch job.
type Job struct {
	// Engine runs the items. Required.
	Engine *idem.Engine
	// Name is the key namespace: letters, digits, '-', '_', '.'. Required.
	Name string
	// Version is the key version. Defaults to 1.
	Version int
	// Run names the period or input of this run ("2024-06-01"). Required.
	Run string
	// Scope is the records' scope. Defaults to "batch".
	Scope string
	// Concurrency is how many items run at once. Defaults to 1.
	Concurrency int
}

// Item is one unit of work.
type Item[T any] struct {
	// ID identifies the item within the run (an account, an invoice).
	ID string
	// Value is passed to the function and fingerprinted (as JSON).
	Value T
}

// Report says what happened to each item of a run.
type Report struct {
	// Applied lists items whose effect ran in this run.
	Applied []string
	// Skipped lists items already applied by an earlier run.
	Skipped []string
	// Failed lists items whose effect failed (now or earlier), with the
	// recorded failure.
	Failed map[string]string
	// Unknown lists items whose outcome is unknown (an earlier run crashed
	// mid-effect): they are not re-run and need reconciliation.
	Unknown []string
	// Retry lists items that released (nothing happened), were in flight
	// in another run, or met a store error: run the job again for them.
	Retry map[string]string
	// Mismatch lists items whose id was already used with other content.
	Mismatch []string
}

func (r *Report) sort() {
	slices.Sort(r.Applied)
	slices.Sort(r.Skipped)
	slices.Sort(r.Unknown)
	slices.Sort(r.Mismatch)
}

// Done reports whether every item is applied or skipped.
func (r *Report) Done() bool {
	return len(r.Failed) == 0 && len(r.Unknown) == 0 && len(r.Retry) == 0 && len(r.Mismatch) == 0
}

// Run applies fn to each item at most once per (job, version, run, item).
// It returns an error only for an invalid job or ctx's end; per-item outcomes
// are in the report.
func Run[T any](ctx context.Context, job Job, items []Item[T], fn func(ctx context.Context, it Item[T]) error) (*Report, error) {
	if err := job.fill(); err != nil {
		return nil, err
	}
	rep := &Report{Failed: map[string]string{}, Retry: map[string]string{}}
	var mu sync.Mutex
	sem := make(chan struct{}, job.Concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		if ctx.Err() != nil { // checked with a slot in hand: ctx may end while we wait for one
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, msg := one(ctx, &job, it, fn)
			mu.Lock()
			defer mu.Unlock()
			rep.add(it.ID, out, msg)
		}()
	}
	wg.Wait()
	rep.sort()
	return rep, ctx.Err()
}

func (j *Job) fill() error {
	if j.Engine == nil || j.Name == "" || j.Run == "" {
		return errors.New("batch: Job.Engine, Job.Name and Job.Run are required")
	}
	if j.Version == 0 {
		j.Version = 1
	}
	if j.Scope == "" {
		j.Scope = "batch"
	}
	if j.Concurrency < 0 {
		return fmt.Errorf("batch: Job.Concurrency must not be negative, got %d", j.Concurrency)
	}
	if j.Concurrency == 0 {
		j.Concurrency = 1
	}
	_, err := idem.DeriveKey(j.Name, j.Version, j.Run, "x")
	return err
}

// Key returns the key of item id in this job's run.
func (j Job) Key(id string) (idem.Key, error) {
	v := j.Version
	if v == 0 {
		v = 1
	}
	return idem.DeriveKey(j.Name, v, j.Run, id)
}

// one runs a single item and classifies its outcome.
func one[T any](ctx context.Context, j *Job, it Item[T], fn func(context.Context, Item[T]) error) (idem.Outcome, string) {
	key, err := j.Key(it.ID)
	if err != nil {
		return idem.OutcomeError, err.Error()
	}
	fp, err := json.Marshal(it.Value)
	if err != nil {
		return idem.OutcomeError, fmt.Sprintf("batch: encode item: %v", err)
	}
	res, err := j.Engine.DoBytes(ctx, idem.Request{Scope: j.Scope, Key: key, Fingerprint: idem.NewFingerprint(fp),
		Operation: j.Name, Policy: idem.Policy{InFlight: idem.InFlightReject}},
		func(ctx context.Context, _ *idem.Attempt) ([]byte, error) { return nil, fn(ctx, it) })
	switch {
	case err == nil && res.Replayed:
		return idem.OutcomeReplay, ""
	case err == nil:
		return idem.OutcomeFirst, ""
	case errors.Is(err, idem.ErrRecordedFailure):
		return idem.OutcomeFailed, err.Error()
	case errors.Is(err, idem.ErrUnknownOutcome):
		return idem.OutcomeUnknown, err.Error()
	case errors.Is(err, idem.ErrMismatch):
		return idem.OutcomeMismatch, err.Error()
	}
	return idem.OutcomeError, err.Error()
}

func (r *Report) add(id string, out idem.Outcome, msg string) {
	switch out {
	case idem.OutcomeFirst:
		r.Applied = append(r.Applied, id)
	case idem.OutcomeReplay:
		r.Skipped = append(r.Skipped, id)
	case idem.OutcomeFailed:
		r.Failed[id] = msg
	case idem.OutcomeUnknown:
		r.Unknown = append(r.Unknown, id)
	case idem.OutcomeMismatch:
		r.Mismatch = append(r.Mismatch, id)
	default:
		r.Retry[id] = msg
	}
}
