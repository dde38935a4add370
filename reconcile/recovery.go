package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// Hook is the recovery hook of one operation: how to ask its provider "did
// you apply key K?" and what to do with the answer.
type Hook struct {
	// Provider answers lookups by forwarded key. Required.
	Provider Provider
	// SettlementWindow is how long after the attempt the provider may still
	// apply the key; its silence decides nothing before then. Defaults to
	// 0: the provider answers synchronously, so "no record" is final.
	SettlementWindow time.Duration
	// NotApplied is what happens to a record the provider never applied,
	// past the window. Defaults to ActionFail.
	NotApplied Action
	// Result builds the value recorded when the provider applied the key,
	// in the form the application's replays decode, for records made by
	// engine callers; records made by an adapter get [AppliedDecision]
	// in their adapter's form (see [Config].Result). Defaults to the JSON
	// of the [Applied] entry.
	Result func(a Applied) ([]byte, error)
}

// RecovererConfig configures a [Recoverer].
type RecovererConfig struct {
	// Hooks maps an intent's operation to its recovery hook. Records of
	// other operations are left unknown. Defaults to none.
	Hooks map[string]Hook
	// BatchSize bounds each List call of RunOnce. Defaults to 500.
	BatchSize int
	// Actor names who resolves records, in the engine's resolution log.
	// Defaults to "recovery".
	Actor string
	// Clock returns the current time. Defaults to the engine's time
	// (Engine.Now: its clock plus its offset to the store's clock).
	Clock func() time.Time
	// Logger receives one line per decision. Defaults to discarding logs.
	Logger *slog.Logger
}

// Decision is what a recovery hook did with one record.
type Decision string

// Recovery decisions.
const (
	// DecidedApplied: the provider applied the key; recorded succeeded.
	DecidedApplied Decision = "applied"
	// DecidedNotApplied: the provider declined or never applied the key;
	// failed or released per the hook.
	DecidedNotApplied Decision = "not_applied"
	// Undecided: the provider could not tell, the window has not passed,
	// the record is still in progress or moved on; it stays as it is.
	Undecided Decision = "undecided"
	// NoHook: no hook is registered for the record's operation.
	NoHook Decision = "no_hook"
)

// Recoverer resolves unknown records by asking each operation's provider.
type Recoverer struct {
	eng *idem.Engine
	cfg RecovererConfig
}

// NewRecoverer returns a recoverer that resolves through eng.
func NewRecoverer(eng *idem.Engine, cfg RecovererConfig) (*Recoverer, error) {
	if eng == nil {
		return nil, errors.New("reconcile: NewRecoverer: engine is required")
	}
	for op, h := range cfg.Hooks {
		if h.Provider == nil {
			return nil, fmt.Errorf("reconcile: RecovererConfig.Hooks[%q].Provider is required", op)
		}
		if h.SettlementWindow < 0 {
			return nil, fmt.Errorf("reconcile: RecovererConfig.Hooks[%q].SettlementWindow must not be negative", op)
		}
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Actor == "" {
		cfg.Actor = "recovery"
	}
	if cfg.Clock == nil {
		cfg.Clock = eng.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Recoverer{eng: eng, cfg: cfg}, nil
}

// Recover decides one record that is unknown (or in progress past its
// lease) with its operation's hook. Other records are Undecided.
func (r *Recoverer) Recover(ctx context.Context, rec idem.Record) (Decision, error) {
	// A record read from the store has its values sealed when the engine
	// encrypts at rest; an opened one is left as it is.
	if err := r.eng.Config().Encryption.OpenRecord(&rec); err != nil {
		return Undecided, fmt.Errorf("reconcile: %w", err)
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil {
		return Undecided, fmt.Errorf("reconcile: intent unreadable: %w", err)
	}
	if in == nil {
		return NoHook, nil
	}
	h, ok := r.cfg.Hooks[in.Operation]
	if !ok {
		return NoHook, nil
	}
	now := r.cfg.Clock().UTC().Truncate(time.Microsecond)
	rec, undecided, err := asUnknown(ctx, r.eng.Store(), r.eng.Config().Encryption, rec, now)
	if errors.Is(err, idem.ErrFenced) || (err == nil && !undecided) {
		return Undecided, nil
	}
	if err != nil {
		return Undecided, err
	}
	got, lerr := h.Provider.Lookup(ctx, forwardKey(rec, in))
	res := h.Result
	if res == nil {
		res = DefaultResult
	}
	d, err := decideUnknown(ctx, r.eng, rec, got, lerr, policy{window: h.SettlementWindow,
		notApplied: h.NotApplied, result: res, actor: r.cfg.Actor}, now)
	out := map[Class]Decision{ClassUnderCounted: DecidedApplied, ClassNotApplied: DecidedNotApplied}[d.class]
	if out == "" {
		out = Undecided
	}
	r.cfg.Logger.Info("reconcile: recovery", "key_hash", keyHash(rec.Scope, rec.Key), "decision", out, "err", err)
	return out, err
}

// RunOnce recovers every unknown record, and every in_progress record whose
// lease has passed, in batches. It returns how many records got each
// decision; per-record errors are joined into the error, after the run.
func (r *Recoverer) RunOnce(ctx context.Context) (map[Decision]int, error) {
	counts := map[Decision]int{}
	var errs []error
	var after *idem.Cursor
	now := r.cfg.Clock().UTC().Truncate(time.Microsecond)
	for {
		recs, err := r.eng.Store().List(ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown, idem.StateInProgress},
			CreatedBefore: now.Add(time.Microsecond), Limit: r.cfg.BatchSize, After: after})
		if err != nil {
			return counts, err
		}
		for _, rec := range recs {
			if rec.EffectiveState(now) != idem.StateUnknown {
				continue
			}
			d, err := r.Recover(ctx, rec)
			counts[d]++
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", keyHash(rec.Scope, rec.Key), err))
			}
		}
		if len(recs) < r.cfg.BatchSize {
			return counts, errors.Join(errs...)
		}
		last := recs[len(recs)-1]
		after = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
	}
}
