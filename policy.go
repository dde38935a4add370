package idem

import "time"

// Policy is the per-operation behaviour. Zero fields take the engine's
// defaults from [Config].
type Policy struct {
	// InFlight chooses what a duplicate does while the first attempt runs.
	InFlight InFlightPolicy
	// Wait bounds how long InFlightWait waits before giving up with
	// ErrInFlight.
	Wait time.Duration
	// Lease is how long an attempt may hold in_progress without a heartbeat.
	Lease time.Duration
	// Timeout bounds the effect; when it passes, the outcome is unknown.
	// Defaults to Config.EffectTimeout.
	Timeout time.Duration
	// Redrivable declares that the provider is idempotent with the forwarded
	// key, so an unknown record may be re-run under a new fence with the
	// same key. Leave false unless that is true.
	Redrivable bool
}

// InFlightPolicy chooses what a duplicate does while the first attempt of
// its intent is in progress.
type InFlightPolicy int

const (
	// InFlightDefault takes the engine's configured policy.
	InFlightDefault InFlightPolicy = iota
	// InFlightReject returns ErrInFlight at once with a retry-after hint
	// (HTTP 409).
	InFlightReject
	// InFlightWait waits up to a bound for the first attempt to finish, then
	// replays its outcome.
	InFlightWait
)
