package idem

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test for them with errors.Is; the typed errors below carry
// details for errors.As.
var (
	// ErrInvalidKey: the key is empty, longer than 255 bytes, or has a byte
	// outside printable ASCII. See [KeyError].
	ErrInvalidKey = errors.New("idem: invalid key")
	// ErrInvalidScope: the scope is longer than 255 bytes, not valid UTF-8,
	// or has a control character. Test with errors.Is; the error is a
	// *ScopeError.
	ErrInvalidScope = errors.New("idem: invalid scope")
	// ErrMismatch: the key was already used with another fingerprint. The
	// recorded outcome is never served for a different request.
	ErrMismatch = errors.New("idem: key reused with a different request")
	// ErrInFlight: another attempt holds the key and the policy is to reject
	// (or the wait bound passed). See [InFlightError] for a retry-after hint.
	ErrInFlight = errors.New("idem: request with this key is in flight")
	// ErrUnknownOutcome: the first attempt's outcome could not be decided; it
	// waits for recovery, reconciliation or an operator and is never re-run
	// unless the operation is re-drivable.
	ErrUnknownOutcome = errors.New("idem: outcome unknown")
	// ErrFenced: a write presented a fence or attempt that no longer holds
	// the record; nothing was written.
	ErrFenced = errors.New("idem: fenced: the record moved on")
	// ErrIntentTooLarge: the request's intent journal is larger than
	// [Config.MaxIntent]; nothing was claimed. See [IntentTooLargeError].
	ErrIntentTooLarge = errors.New("idem: intent too large")
	// ErrNotFound: no record for (scope, key).
	ErrNotFound = errors.New("idem: record not found")
	// ErrClosed: the store or engine was closed.
	ErrClosed = errors.New("idem: closed")
	// ErrStoreUnavailable wraps a store failure that left the outcome of the
	// call undecided by idem; callers fail closed (HTTP 503).
	ErrStoreUnavailable = errors.New("idem: store unavailable")
	// ErrRetentionTooShort: the configured TTL is shorter than a window it
	// must cover. See [RetentionError].
	ErrRetentionTooShort = errors.New("idem: retention shorter than a window it must cover")
	// ErrRecordedFailure: the intent's recorded outcome is a failure. On a
	// replay the error is a [*FailureError].
	ErrRecordedFailure = errors.New("idem: recorded failure")
	// ErrReleased marks a handler error meaning "no effect happened": the
	// claim is released and the key may be claimed again. Wrap with
	// [Release].
	ErrReleased = errors.New("idem: released, no effect")
	// ErrUnknown marks a handler error meaning "the effect may or may not
	// have happened". Wrap with [Unknown].
	ErrUnknown = errors.New("idem: effect outcome unknown")
	// ErrNotDurable is matched by a store's error for a claim it wrote
	// but could not make durable where it was configured to (its
	// replicas did not confirm it within the store's bound): the claim
	// failed closed and the effect does not run. The engine does not
	// retry it — the store has waited its bound already — and reports it
	// as [ErrStoreUnavailable] (HTTP 503).
	ErrNotDurable = errors.New("idem: the claim could not be made durable in time")
)

// NotDurableError is an error a store returns (or wraps) for a claim that
// failed closed: it matches [ErrNotDurable]. Msg is its whole message.
type NotDurableError struct{ Msg string }

func (e *NotDurableError) Error() string { return e.Msg }

// Is reports [ErrNotDurable].
func (e *NotDurableError) Is(target error) bool { return target == ErrNotDurable }

// KeyError says why a key was refused.
type KeyError struct {
	Key    string // the offending key, truncated to 64 bytes for display
	Reason string
}

func (e *KeyError) Error() string { return fmt.Sprintf("idem: invalid key: %s", e.Reason) }

// Is reports ErrInvalidKey.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// ScopeError says why a scope was refused.
type ScopeError struct {
	Reason string
}

func (e *ScopeError) Error() string { return "idem: invalid scope: " + e.Reason }

// Is reports ErrInvalidScope.
func (e *ScopeError) Is(target error) bool { return target == ErrInvalidScope }

// IntentTooLargeError is returned when a request's encoded intent is larger
// than [Config.MaxIntent]. Nothing was claimed and the effect did not run.
type IntentTooLargeError struct {
	Size int // bytes of the encoded intent
	Max  int // Config.MaxIntent
}

func (e *IntentTooLargeError) Error() string {
	return fmt.Sprintf("idem: intent of %d bytes is larger than the bound of %d (Config.MaxIntent)", e.Size, e.Max)
}

// Is reports [ErrIntentTooLarge].
func (e *IntentTooLargeError) Is(target error) bool { return target == ErrIntentTooLarge }

// MismatchError reports a key reused with another fingerprint.
type MismatchError struct {
	Scope, Key string
	// Record is the existing record (its Result must not be served).
	Record *Record
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idem: key %q was already used with a different request", e.Key)
}

// Is reports ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// InFlightError reports that another attempt holds the key.
type InFlightError struct {
	Scope, Key string
	// RetryAfter is a hint for when to try again.
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idem: key %q is in flight; retry after %s", e.Key, e.RetryAfter)
}

// Is reports ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// UnknownOutcomeError reports a record whose outcome is undecided.
type UnknownOutcomeError struct {
	Scope, Key string
	Record     *Record
	// RetryAfter is a hint for clients (the outcome may be resolved later).
	RetryAfter time.Duration
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("idem: outcome of key %q is unknown; it awaits recovery or reconciliation", e.Key)
}

// Is reports ErrUnknownOutcome.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }

// FailureError is a recorded failure: the handler's error on the first run
// is recorded as its message and replayed as a FailureError to duplicates.
type FailureError struct {
	Message  string
	Replayed bool
	// Err is the handler's original error on the first run; nil on replay.
	Err error
}

func (e *FailureError) Error() string { return e.Message }

// Is reports ErrRecordedFailure.
func (e *FailureError) Is(target error) bool { return target == ErrRecordedFailure }

// Unwrap returns the handler's original error, if any.
func (e *FailureError) Unwrap() error { return e.Err }

// RetentionError names the window a TTL fails to cover.
type RetentionError struct {
	Window string
	Need   time.Duration
	TTL    time.Duration
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("idem: retention TTL %s is shorter than window %q (%s): a duplicate arriving inside that window would run again", e.TTL, e.Window, e.Need)
}

// Is reports ErrRetentionTooShort.
func (e *RetentionError) Is(target error) bool { return target == ErrRetentionTooShort }

// StoreError wraps a backend failure with the operation that failed.
type StoreError struct {
	Op  string
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("idem: store %s: %v", e.Op, e.Err) }

// Unwrap returns the backend error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is reports ErrStoreUnavailable.
func (e *StoreError) Is(target error) bool { return target == ErrStoreUnavailable }

type markedError struct {
	mark error
	err  error
}

func (e *markedError) Error() string {
	if e.err == nil {
		return e.mark.Error()
	}
	return e.err.Error()
}
func (e *markedError) Unwrap() []error { return []error{e.mark, e.err} }

// Release wraps err to say that no effect happened: the engine deletes the
// claim so the key can be claimed again, and returns err to the caller.
// Release(nil) is a plain release with no cause.
func Release(err error) error { return &markedError{mark: ErrReleased, err: err} }

// Unknown wraps err to say the effect may or may not have happened: the
// record becomes unknown and waits for recovery or reconciliation.
func Unknown(err error) error { return &markedError{mark: ErrUnknown, err: err} }

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// ErrStoreLostClaim: recording an outcome found that the store no longer
// had the claim the effect ran under — the record vanished, or another
// attempt holds the key at a fence that did not grow. The store went back
// in time (a failover to a replica that never received the claim, a
// restart that forgot it), so a retry may already have run the effect
// again. It is not [ErrFenced]: nothing took the claim over by the rules.
// The error is a [*LostClaimError].
var ErrStoreLostClaim = errors.New("idem: the store lost a claim")

// LostClaimError reports an outcome write that found its claim lost by
// the store (see [ErrStoreLostClaim]).
type LostClaimError struct {
	Scope, Key string
	// Fence and AttemptID are the claim the effect ran under.
	Fence     int64
	AttemptID string
	// Found is the record the store holds now, or nil when it has none.
	Found *Record
	// WrittenBack is true when the engine wrote the known outcome back as
	// a new record (the key was free), so retries replay it from now on.
	WrittenBack bool
}

func (e *LostClaimError) Error() string {
	s := fmt.Sprintf("idem: the store lost the claim of key %q (fence %d) while its effect ran", e.Key, e.Fence)
	switch {
	case e.Found == nil && e.WrittenBack:
		return s + ": the record was gone; the outcome was written back"
	case e.Found == nil:
		return s + ": the record is gone"
	default:
		return s + fmt.Sprintf(": another attempt holds the key at fence %d (%s), so a retry may have run the effect again", e.Found.Fence, e.Found.State)
	}
}

// Is reports [ErrStoreLostClaim].
func (e *LostClaimError) Is(target error) bool { return target == ErrStoreLostClaim }
