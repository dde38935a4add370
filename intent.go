package idem

import (
	"context"
	"encoding/json"
	"time"
)

// Intent is the intent journal written with the claim, before the effect
// runs, so that a crash between a provider call and the outcome leaves an
// unknown record that says what was intended.
type Intent struct {
	// Operation names the business action ("charge", "refund").
	Operation string `json:"operation,omitempty"`
	// Amount in integer minor units (cents); never a float.
	Amount int64 `json:"amount,omitempty"`
	// Currency is an ISO 4217 code.
	Currency string `json:"currency,omitempty"`
	// Counterparty names the provider or peer the effect goes to.
	Counterparty string `json:"counterparty,omitempty"`
	// ForwardKey is the key forwarded to the provider. Empty means the
	// request's key. It must be stable across every attempt of the intent.
	ForwardKey string `json:"forward_key,omitempty"`
	// Fields holds any other business fields.
	Fields map[string]string `json:"fields,omitempty"`
}

// IntentBuilder builds a request's intent on demand; see
// [Request.LazyIntent].
type IntentBuilder interface {
	BuildIntent() *Intent
}

// DecodeIntent decodes a record's Intent bytes; empty bytes give nil.
func DecodeIntent(b []byte) (*Intent, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in Intent
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Attempt is handed to the effect: one execution of the effect under a claim.
type Attempt struct {
	// Scope and Key identify the intent.
	Scope string
	Key   Key
	// Fence is the claim's fence; ID identifies this attempt.
	Fence int64
	ID    string
	// Intent is the journal written with the claim, if any.
	Intent *Intent
	// Redrive is true when this attempt re-runs an unknown record of a
	// re-drivable operation.
	Redrive bool

	heartbeat *heartbeater
}

// ForwardKey is the key to forward to a provider on every attempt of this
// intent: Intent.ForwardKey when set, else the request's key. It is never
// derived from the attempt, the time or randomness.
func (a *Attempt) ForwardKey() string {
	if a.Intent != nil && a.Intent.ForwardKey != "" {
		return a.Intent.ForwardKey
	}
	return string(a.Key)
}

// Heartbeat extends the attempt's lease now. The engine already heartbeats
// in the background every third of the lease; call this before a step you
// know to be long. It returns ErrFenced when the attempt lost its claim.
func (a *Attempt) Heartbeat(ctx context.Context) error {
	if a.heartbeat == nil {
		return nil
	}
	return a.heartbeat.beat(ctx)
}

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
