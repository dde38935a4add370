package idemgrpc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the ErrorInfo domain of every error idemgrpc answers.
const ErrorDomain = "idem.idemkit.github.io"

// ErrorInfo reasons. They are stable: clients may compare them (see
// [Reason]).
const (
	// ReasonKeyMissing: a method that requires a key got none
	// (InvalidArgument).
	ReasonKeyMissing = "KEY_MISSING"
	// ReasonKeyInvalid: the idempotency-key metadata is malformed,
	// repeated, empty or longer than 255 bytes (InvalidArgument).
	ReasonKeyInvalid = "KEY_INVALID"
	// ReasonKeyMismatch: the key was already used with a different method
	// or request (FailedPrecondition). Metadata "fields" names the
	// differing top-level request fields, comma-separated; "method" is
	// "differs" when the first call was to another method.
	ReasonKeyMismatch = "KEY_MISMATCH"
	// ReasonInFlight: a call with this key is being processed (Aborted,
	// with a RetryInfo detail).
	ReasonInFlight = "IN_FLIGHT"
	// ReasonOutcomeUnknown: the first call's outcome could not be decided
	// (lease expired, crash, timeout). It is never re-run; it waits for
	// recovery or an operator (Aborted, with a RetryInfo detail).
	ReasonOutcomeUnknown = "OUTCOME_UNKNOWN"
	// ReasonStoreUnavailable: the record store could not be reached; the
	// handler did not run (Unavailable, with a RetryInfo detail).
	ReasonStoreUnavailable = "STORE_UNAVAILABLE"
	// ReasonScopeMissing: the call carries no principal to scope its key
	// by (Unauthenticated).
	ReasonScopeMissing = "SCOPE_MISSING"
	// ReasonScopeInvalid: the scope the call maps to cannot be kept
	// (see idem.ValidateScope); nothing was claimed (InvalidArgument).
	ReasonScopeInvalid = "SCOPE_INVALID"
	// ReasonResponseTooLarge: the call was applied, but its answer was too
	// large to record, so a replay cannot repeat it (FailedPrecondition).
	// Metadata "recorded_code" is the answer's code name.
	ReasonResponseTooLarge = "RESPONSE_TOO_LARGE"
	// ReasonDecidedFailed: the first call's outcome was lost, and it was
	// decided as failed outside the call — by reconciliation, a recovery
	// hook or an operator (FailedPrecondition); the message says why.
	// Retries with the key get this answer again; a new attempt needs a
	// new key. See [EncodeDecision].
	ReasonDecidedFailed = "DECIDED_FAILED"
	// ReasonRecordUnreadable: a record exists but its answer cannot be
	// decoded (Internal). It is never re-run.
	ReasonRecordUnreadable = "RECORD_UNREADABLE"
	// ReasonRequestUnencodable: the request is not a protobuf message, or
	// cannot be encoded, so it has no fingerprint (Internal).
	ReasonRequestUnencodable = "REQUEST_UNENCODABLE"
)

// Reason returns the ErrorInfo reason of an error answered by idemgrpc
// (one of the Reason constants), or "" for any other error.
func Reason(err error) string {
	s, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

// refusal builds an idemgrpc error status.
func refusal(code codes.Code, reason, msg string, meta map[string]string, retry time.Duration) error {
	s := status.New(code, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	sd, err := s.WithDetails(details...)
	if err != nil {
		return s.Err()
	}
	return sd.Err()
}

// keyError answers a missing or invalid key.
func keyError(err error) error {
	if errors.Is(err, ErrNoKey) {
		return refusal(codes.InvalidArgument, ReasonKeyMissing,
			"this method requires idempotency-key metadata", nil, 0)
	}
	reason := "the idempotency-key metadata is invalid"
	var ke *idem.KeyError
	if errors.As(err, &ke) {
		reason += ": " + ke.Reason
	}
	return refusal(codes.InvalidArgument, ReasonKeyInvalid, reason, nil, 0)
}

// engineError maps an error of the engine, for a call whose handler did
// not run here, to the status answered.
func (s *server) engineError(err error, scope, fullMethod string, req proto.Message) error {
	var (
		me *idem.MismatchError
		fe *idem.InFlightError
		ue *idem.UnknownOutcomeError
		se *idem.ScopeError
	)
	switch {
	case errors.As(err, &me):
		return refusal(codes.FailedPrecondition, ReasonKeyMismatch,
			"this idempotency key was already used with a different request; use a new key for a new request",
			s.mismatchMeta(scope, me.Record, fullMethod, req), 0)
	case errors.As(err, &fe):
		return refusal(codes.Aborted, ReasonInFlight,
			"a call with this idempotency key is being processed; retry after the indicated delay", nil, fe.RetryAfter)
	case errors.As(err, &ue):
		return refusal(codes.Aborted, ReasonOutcomeUnknown,
			"the first call with this idempotency key may or may not have been applied; it will not be run again until its outcome is resolved",
			nil, ue.RetryAfter)
	case errors.Is(err, idem.ErrInvalidKey):
		return keyError(err)
	case errors.As(err, &se):
		return refusal(codes.InvalidArgument, ReasonScopeInvalid,
			"the principal this call's key is scoped by cannot be used as a scope: "+se.Reason, nil, 0)
	case errors.Is(err, idem.ErrStoreUnavailable), errors.Is(err, idem.ErrClosed):
		return refusal(codes.Unavailable, ReasonStoreUnavailable,
			"the call was not run: it cannot be protected against duplicates right now", nil, s.engine.Config().RetryAfter)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	s.cfg.Logger.Error("idemgrpc: unexpected engine error", "err", err)
	return status.Error(codes.Internal, "idemgrpc: internal error")
}

// mismatchMeta is the ErrorInfo metadata of a mismatch: the differing
// fields' names (none in the global scope) and whether the method differs.
func (s *server) mismatchMeta(scope string, rec *idem.Record, fullMethod string, req proto.Message) map[string]string {
	meta := map[string]string{}
	if f := s.mismatchFields(scope, rec, req); len(f) > 0 {
		meta["fields"] = strings.Join(f, ",")
	}
	if rec != nil {
		if in, err := idem.DecodeIntent(rec.Intent); err == nil && in != nil {
			if m, ok := in.Fields[methodField]; ok && m != fullMethod {
				meta["method"] = "differs"
			}
		}
	}
	return meta
}
