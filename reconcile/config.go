package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// Action says what to do with an unknown record the provider never applied
// once the settlement window has passed.
type Action int

// Actions for a key the provider never applied.
const (
	// ActionFail resolves the record as failed: duplicates replay the
	// failure and nothing runs again under that key. The safe default.
	ActionFail Action = iota
	// ActionRelease deletes the record, so the next request with the key
	// runs the effect. Choose it only when the provider is idempotent with
	// the forwarded key or the settlement window is certain.
	ActionRelease
	// ActionLeave keeps the record unknown for an operator.
	ActionLeave
)

// ParseAction parses "fail", "release" or "leave".
func ParseAction(s string) (Action, error) {
	switch s {
	case "fail":
		return ActionFail, nil
	case "release":
		return ActionRelease, nil
	case "leave":
		return ActionLeave, nil
	}
	return 0, fmt.Errorf("reconcile: unknown action %q (want fail, release or leave)", s)
}

// Config configures a [Reconciler].
type Config struct {
	// SettlementWindow is how long after a local record the provider may
	// still report it; only past it does the provider's silence count as
	// "none". Defaults to 24h.
	SettlementWindow time.Duration
	// BatchSize bounds each List call. Defaults to 500.
	BatchSize int
	// Interval between runs once started. Defaults to 10m.
	Interval time.Duration
	// Lookback is how far back provider entries are listed to find keys
	// with no local record. Entries older than it with no local record are
	// not compared (their records may have been swept) but counted in the
	// report as unchecked rows ("older than the look-back"), so a run that
	// left any is not clean. Defaults to the engine's TTL or the
	// settlement window, whichever is longer: a provider reports an entry
	// up to the settlement window late.
	Lookback time.Duration
	// Scope restricts reconciliation to one scope. Defaults to all scopes.
	Scope string
	// Match selects the intents this provider is responsible for (by
	// operation or counterparty). Defaults to every record with an intent.
	Match func(in *idem.Intent) bool
	// NotApplied is what happens to an unknown record the provider never
	// applied, past the settlement window. Defaults to ActionFail.
	NotApplied Action
	// OrphanScope is the scope under which a provider entry with no local
	// record is recorded, when the entry names none. Defaults to "".
	OrphanScope string
	// Result builds the value recorded for a key the provider applied, on
	// records made by engine callers (the handler's value, in the
	// engine's codec). Records made by an adapter (idemhttp and idem
	// proxy, idemgrpc, idemmcp: an intent with an origin) get
	// [AppliedDecision] instead, and those decided not applied
	// [NotAppliedDecision], each written by its adapter's encoder
	// ([idem.EncodeDecision]), so their retries replay an answer; the
	// program running the reconciler must import those adapters. Defaults
	// to the JSON of the [Applied] entry.
	Result func(a Applied) ([]byte, error)
	// Actor names who resolves records, in the engine's resolution log.
	// Defaults to "reconciler".
	Actor string
	// Clock returns the current time. Defaults to the engine's time
	// (Engine.Now: its clock plus its offset to the store's clock).
	Clock func() time.Time
	// Logger receives one line per run and one per decision. Defaults to
	// discarding logs.
	Logger *slog.Logger
	// OnProgress, when set, is called after each batch with the number of
	// records checked so far (the CLI prints a progress line from it).
	// Defaults to none.
	OnProgress func(checked int)
	// OnRun, when set, is called after each run with its report (a metrics
	// adapter or a test signal). Defaults to none.
	OnRun func(r *Report, err error)
}

func (c *Config) fill(eng *idem.Engine) error {
	if c.SettlementWindow == 0 {
		c.SettlementWindow = 24 * time.Hour
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Interval == 0 {
		c.Interval = 10 * time.Minute
	}
	if c.Lookback == 0 {
		c.Lookback = max(eng.Config().TTL, c.SettlementWindow)
	}
	if c.Match == nil {
		c.Match = func(*idem.Intent) bool { return true }
	}
	if c.Result == nil {
		c.Result = DefaultResult
	}
	if c.Actor == "" {
		c.Actor = "reconciler"
	}
	if c.Clock == nil {
		c.Clock = eng.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var errs []error
	for name, d := range map[string]time.Duration{"SettlementWindow": c.SettlementWindow, "Interval": c.Interval, "Lookback": c.Lookback} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("reconcile: Config.%s must not be negative, got %s", name, d))
		}
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("reconcile: Config.BatchSize must not be negative, got %d", c.BatchSize))
	}
	if c.NotApplied < ActionFail || c.NotApplied > ActionLeave {
		errs = append(errs, fmt.Errorf("reconcile: Config.NotApplied: unknown action %d", c.NotApplied))
	}
	return errors.Join(errs...)
}

// DefaultResult records the provider's entry as JSON.
func DefaultResult(a Applied) ([]byte, error) { return json.Marshal(a) }
