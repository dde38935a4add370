package idem

import (
	"context"
	"time"
)

// Outcome classifies what one engine call did, for metrics and traces.
type Outcome string

// The outcomes an engine call reports. Names are stable: metric labels use
// them.
const (
	OutcomeFirst    Outcome = "first"    // the effect ran and succeeded
	OutcomeReplay   Outcome = "replay"   // a recorded outcome was returned
	OutcomeConflict Outcome = "conflict" // in flight elsewhere; rejected or wait bound passed
	OutcomeMismatch Outcome = "mismatch" // same key, different fingerprint
	OutcomeReleased Outcome = "released" // the handler said no effect happened
	OutcomeFailed   Outcome = "failed"   // the effect ran and failed; recorded
	OutcomeUnknown  Outcome = "unknown"  // the outcome could not be decided
	OutcomeFenced   Outcome = "fenced"   // the attempt lost its claim before recording
	// OutcomeLostClaim: the effect ran, and recording its outcome found
	// that the store had lost the claim (a failover to a replica that
	// never had it, a record that vanished): see [ErrStoreLostClaim].
	OutcomeLostClaim Outcome = "lost_claim"
	OutcomeError     Outcome = "error" // the store failed; nothing was run
	// OutcomeCancelled: the caller went away (its context ended) before
	// the effect started; nothing was run and nothing is claimed.
	OutcomeCancelled Outcome = "cancelled"
)

// EventKind says which fields of an [Event] are set.
type EventKind int

// Event kinds.
const (
	// EventOutcome: one engine call ended. Outcome, Operation, Scope, Key,
	// Duration (whole call), Err.
	EventOutcome EventKind = iota + 1
	// EventStore: one store operation ended. StoreOp, Duration, Err.
	EventStore
	// EventWait: a duplicate waited for an in-flight attempt. Duration.
	EventWait
	// EventInFlight: an effect started (Delta +1) or ended (Delta -1).
	EventInFlight
	// EventSpool: outcomes entered the engine's [Spool] (Delta > 0: the
	// store could not take them; at start-up, those found there) or left
	// it (Delta -1: applied to the store, or dropped because the record
	// moved on). Scope and Key are set for one outcome.
	EventSpool
	// EventClientGone: the client of a request whose effect ran went away
	// (disconnected, or stopped reading its response) before the response
	// reached it. The effect and its recorded outcome are not affected.
	// Reported by adapters (idemhttp), not by the engine. Operation,
	// Scope, Key.
	EventClientGone
	// EventVolatileStore: the engine started on a store that can forget
	// recorded outcomes because Config.AllowVolatileStore is set (Delta 1;
	// Err is the [*VolatileStoreError], or why the check could not run).
	EventVolatileStore
	// EventClockOffset: the engine measured its offset to the store's
	// clock (Duration: store minus engine; see [StoreClock]).
	EventClockOffset
	// EventScopeQuota: a request was refused by a per-scope quota before
	// its effect ran (its claim released). Reported by adapters
	// (idemhttp), not by the engine. Quota ("inflight" or "rate"),
	// Operation, Scope, Key.
	EventScopeQuota
	// EventReplication: at start, whether a failover of the store can
	// lose an acknowledged claim (see [ReplicationChecker]): Delta 1 when
	// it cannot (or the store has no replication to check), 0 when the
	// engine started on an unsafe setup because
	// Config.AllowAsyncReplication is set (Err is the
	// [*ReplicationError], or why the check could not run).
	EventReplication
	// EventLostClaim: an outcome write found that the store had lost the
	// claim the effect ran under (Delta 1; Err is the [*LostClaimError]).
	// Scope, Key, Operation.
	EventLostClaim
)

// Event is what the engine reports to an [Observer]. Scope and Key are the
// raw values; adapters that export them must hash them.
type Event struct {
	Kind      EventKind
	Outcome   Outcome
	Operation string
	Scope     string
	Key       string
	StoreOp   string
	Duration  time.Duration
	Delta     int
	Err       error
	// Quota names the quota of an EventScopeQuota.
	Quota string
}

// Observer receives engine events, so that metrics and tracing adapters
// attach without the core importing them. Observe is called synchronously on
// the hot path and must be fast and safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, ev Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, ev Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, ev Event) { f(ctx, ev) }

// Observers fans events out to several observers in order.
func Observers(obs ...Observer) Observer {
	return ObserverFunc(func(ctx context.Context, ev Event) {
		for _, o := range obs {
			if o != nil {
				o.Observe(ctx, ev)
			}
		}
	})
}

type nopObserver struct{}

func (nopObserver) Observe(context.Context, Event) {}

// observing reports whether o does anything with events.
func observing(o Observer) bool {
	_, nop := o.(nopObserver)
	return !nop
}
