package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A store that can forget a record silently turns a replay into a second
// effect: a Redis that evicts keys under memory pressure or keeps nothing
// across a restart, a SQLite with synchronous=OFF, a PostgreSQL with
// fsync=off. Stores that can read their backend's settings implement
// [DurabilityChecker]; [New] asks them and refuses one that can forget,
// unless Config.AllowVolatileStore says to go on.

// DurabilityChecker is implemented by stores that can read the settings
// that decide whether their backend keeps what it acknowledged.
type DurabilityChecker interface {
	// CheckDurability returns one finding per setting that lets the
	// backend lose an acknowledged record, or none. A setting it cannot
	// read (a server that disables the command) is itself a finding,
	// saying so. An error means the check could not run at all (the
	// backend did not answer). ctx bounds the check.
	CheckDurability(ctx context.Context) ([]Finding, error)
}

// Severity says what a [Finding] means for running on the store.
type Severity int

const (
	// SeverityWarning: records may be lost in a rarer event (a power cut, an
	// operating-system crash) or the setting could not be read. The engine
	// logs it and runs.
	SeverityWarning Severity = iota + 1
	// SeverityRefuse: the backend forgets acknowledged records in ordinary
	// operation (eviction, a restart). New refuses the store unless
	// Config.AllowVolatileStore is set.
	SeverityRefuse
)

// String returns "warning" or "refuse".
func (s Severity) String() string {
	switch s {
	case SeverityWarning:
		return "warning"
	case SeverityRefuse:
		return "refuse"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// Finding is one thing found wrong with a store: the setting, its value,
// what it lets go wrong, and how to fix it.
type Finding struct {
	// Setting names the backend setting, as its operator writes it
	// (e.g. "maxmemory-policy", "fsync").
	Setting string
	// Value is the setting's current value, or "unreadable".
	Value string
	// Problem says what the value lets happen to recorded outcomes.
	Problem string
	// Fix says what to change.
	Fix string
	// Severity says whether the engine refuses the store or warns.
	Severity Severity
}

// String renders the finding on one line: setting, value, problem, fix.
func (f Finding) String() string {
	return fmt.Sprintf("%s = %s: %s; fix: %s", f.Setting, f.Value, f.Problem, f.Fix)
}

// ErrVolatileStore is matched (errors.Is) by the error [New] returns for a
// store that can forget acknowledged records. The error is a
// [*VolatileStoreError] naming each setting and its fix.
var ErrVolatileStore = errors.New("idem: the store can forget recorded outcomes")

// VolatileStoreError is New's refusal of a store that can forget.
type VolatileStoreError struct {
	// Findings are the refusing findings (Severity SeverityRefuse).
	Findings []Finding
}

func (e *VolatileStoreError) Error() string {
	parts := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		parts[i] = f.String()
	}
	return "idem: the store can forget recorded outcomes, so a retry would run its effect again: " +
		strings.Join(parts, "; ") + " (set Config.AllowVolatileStore to run anyway)"
}

// Is matches ErrVolatileStore.
func (e *VolatileStoreError) Is(target error) bool { return target == ErrVolatileStore }

// checkDurability asks a [DurabilityChecker] store about its settings:
// warnings are logged, refusals refuse unless cfg.AllowVolatileStore, and
// then are logged at error level and reported to the Observer as an
// [EventVolatileStore]. A check that cannot run refuses too, under the
// same override: an engine must not start on a store it cannot vouch for
// without being told to.
func checkDurability(ctx context.Context, store Store, cfg *Config) error {
	dc, ok := store.(DurabilityChecker)
	if !ok {
		return nil
	}
	findings, err := dc.CheckDurability(ctx)
	if err != nil {
		if !cfg.AllowVolatileStore {
			return fmt.Errorf("idem: New: checking the store's durability: %w (set Config.AllowVolatileStore to run without the check)", err)
		}
		cfg.Logger.Error("idem: the store's durability could not be checked; running because AllowVolatileStore is set", "err", err)
		cfg.Observer.Observe(ctx, Event{Kind: EventVolatileStore, Delta: 1, Err: err})
		return nil
	}
	var refuse []Finding
	for _, f := range findings {
		if f.Severity == SeverityRefuse {
			refuse = append(refuse, f)
			continue
		}
		cfg.Logger.Warn("idem: store durability", "setting", f.Setting, "value", f.Value, "problem", f.Problem, "fix", f.Fix)
	}
	if len(refuse) == 0 {
		return nil
	}
	verr := &VolatileStoreError{Findings: refuse}
	if !cfg.AllowVolatileStore {
		return verr
	}
	for _, f := range refuse {
		cfg.Logger.Error("idem: RUNNING ON A STORE THAT CAN FORGET RECORDED OUTCOMES (AllowVolatileStore is set): a retry after a lost record runs its effect again",
			"setting", f.Setting, "value", f.Value, "problem", f.Problem, "fix", f.Fix)
	}
	cfg.Observer.Observe(ctx, Event{Kind: EventVolatileStore, Delta: 1, Err: verr})
	return nil
}
