package idem

import "context"

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
