package idem

import (
	"fmt"
	"time"
)

// State is the lifecycle state of a [Record].
type State string

// The record states. A released attempt has no state: its row is deleted.
const (
	// StateInProgress: an attempt holds the claim and may be running the
	// effect. Once its lease has passed, every reader treats it as unknown.
	StateInProgress State = "in_progress"
	// StateSucceeded: the effect ran and its result is recorded; duplicates
	// replay it until the record expires.
	StateSucceeded State = "succeeded"
	// StateFailed: the handler returned an error after the effect may have
	// started; duplicates replay the recorded failure until expiry.
	StateFailed State = "failed"
	// StateUnknown: the outcome could not be decided (lease expired, panic,
	// timeout, crash). Unknown records never expire and are never swept: they
	// are evidence for recovery and reconciliation.
	StateUnknown State = "unknown"
)

// Valid reports whether s is one of the four record states.
func (s State) Valid() bool {
	switch s {
	case StateInProgress, StateSucceeded, StateFailed, StateUnknown:
		return true
	}
	return false
}

// Terminal reports whether s is succeeded or failed: states whose record is
// final until it expires.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailed }

// ParseState parses a state name as written by [State.String].
func ParseState(s string) (State, error) {
	st := State(s)
	if !st.Valid() {
		return "", fmt.Errorf("idem: unknown state %q (want in_progress, succeeded, failed or unknown)", s)
	}
	return st, nil
}

func (s State) String() string { return string(s) }

// Mark is a reconciliation annotation stored on a record. It never changes
// the record's state; it says what reconciliation concluded about it.
type Mark string

// Reconciliation marks.
const (
	MarkNone        Mark = ""
	MarkReconciled  Mark = "reconciled"   // local and provider agree
	MarkOverCounted Mark = "over_counted" // recorded locally, provider has none
	MarkDrift       Mark = "drift"        // both have it, amounts or currency differ
)

// Record is what a store keeps for one (scope, key).
type Record struct {
	// Scope is who the key belongs to; uniqueness is on (Scope, Key).
	Scope string
	// Key is the intent's identity.
	Key string
	// Fingerprint is the hash of the canonical request that claimed the key.
	Fingerprint Fingerprint
	// State is the lifecycle state.
	State State
	// Fence grows each time the record is (re)claimed or resolved. Outcome
	// writes must present the fence (and attempt id) they claimed with.
	Fence int64
	// AttemptID identifies the attempt that holds or last held the claim. It
	// lets a claim or outcome write retried after a lost answer recognise its
	// own row.
	AttemptID string
	// Intent is the intent journal: opaque metadata written with the claim,
	// before the effect runs (JSON of [Intent] when the engine writes it).
	Intent []byte
	// Result is the recorded outcome: the encoded value for succeeded, the
	// encoded failure for failed, empty otherwise.
	Result []byte
	// Mark is the reconciliation annotation.
	Mark Mark
	// CreatedAt is when the current claim was made.
	CreatedAt time.Time
	// LeaseUntil is when an in_progress attempt stops being trusted. It
	// means nothing once the record is succeeded or failed, and a store
	// may clear it then (pgstore does, to keep its rows small).
	LeaseUntil time.Time
	// CompletedAt is when the outcome (or unknown) was recorded; zero before.
	CompletedAt time.Time
	// ExpiresAt is when a succeeded/failed record stops replaying and the
	// key becomes a new intent. Zero for in_progress and unknown.
	ExpiresAt time.Time

	// storedIntent is Intent as the store holds it, kept when the engine
	// opened a sealed record (opened set), so that an outcome write can
	// still hand the store its claim as the store holds it (see
	// Engine.finishAt). Stores neither set nor read it.
	storedIntent []byte
	opened       bool
}

// Expired reports whether r is a terminal record whose retention has passed
// at now. Expired records are treated as absent by claim.
func (r *Record) Expired(now time.Time) bool {
	return r.State.Terminal() && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// LeaseExpired reports whether r is in_progress and its lease has passed at
// now, so every reader must treat it as unknown.
func (r *Record) LeaseExpired(now time.Time) bool {
	return r.State == StateInProgress && !now.Before(r.LeaseUntil)
}

// EffectiveState is the state every reader acts on at now: the stored
// state, except that an in_progress record whose lease has passed is
// unknown (its attempt can no longer be trusted to record an outcome).
// Readers that show, count, list or decide records use it; only the write
// that turns such a record unknown looks at [Record.LeaseExpired] itself.
func (r *Record) EffectiveState(now time.Time) State {
	if r.LeaseExpired(now) {
		return StateUnknown
	}
	return r.State
}
