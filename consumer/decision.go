package consumer

import (
	"time"

	"github.com/idemkit/idem"
)

// Action is what an adapter must do with a delivery.
type Action int

// Actions.
const (
	// ActionAck: the outcome is recorded (now or before); acknowledge.
	ActionAck Action = iota + 1
	// ActionRetry: nothing was recorded that settles the message; ask the
	// broker to redeliver after Decision.Delay.
	ActionRetry
	// ActionDeadLetter: settle the message onto the dead-letter path; the
	// record (if any) holds the outcome. Decision.Reason says why.
	ActionDeadLetter
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionRetry:
		return "retry"
	case ActionDeadLetter:
		return "dead_letter"
	}
	return "invalid"
}

// Reason says why a message was dead-lettered. Values are stable: adapters
// put them in a header and logs use them.
type Reason string

// Reasons.
const (
	// ReasonFailed: the handler failed; the failure is recorded.
	ReasonFailed Reason = "failed"
	// ReasonMismatch: the key was already used with another payload.
	ReasonMismatch Reason = "mismatch"
	// ReasonInvalidKey: no usable key could be read from the message.
	ReasonInvalidKey Reason = "invalid_key"
	// ReasonUnknown: the outcome is unknown; the message is parked for
	// reconciliation and the record is the evidence.
	ReasonUnknown Reason = "unknown"
)

// Decision is the result of processing one delivery.
type Decision struct {
	// Action is what the adapter must do.
	Action Action
	// Delay is how long to wait before redelivery (ActionRetry).
	Delay time.Duration
	// Reason says why (ActionDeadLetter).
	Reason Reason
	// Outcome is how the engine classified the call.
	Outcome idem.Outcome
	// Scope and Key identify the record; Key is empty when none was read.
	Scope string
	Key   idem.Key
	// Record is the record as last seen, when known.
	Record *idem.Record
	// Value is the recorded value of an acked message: what a
	// [ValueHandler] returned, on its first run or replayed. Nil for a
	// [Handler].
	Value []byte
	// Err is the error behind a retry or dead letter.
	Err error
}
