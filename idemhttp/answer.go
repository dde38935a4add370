package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// answer writes the response for a request whose handler did not run here:
// a replay, or an error from the engine.
func (m *Middleware) answer(w http.ResponseWriter, r *http.Request, scope string, res idem.Result, err error, in *input) {
	switch {
	case err == nil && res.Replayed, err != nil && replayedFailure(err):
		m.replay(w, r, res.Value)
	case err == nil:
		// Not reachable: without a replay the handler ran. Be explicit
		// rather than answer nothing.
		WriteProblem(w, problem(TypeInternal, http.StatusInternalServerError, "internal error", ""))
	default:
		WriteProblem(w, m.errorProblem(r.Context(), scope, err, in))
	}
}

// replayedFailure reports whether err is a recorded failure being replayed.
// (Its own function, so that the error-path variable errors.As needs is
// not allocated on every call.)
func replayedFailure(err error) bool {
	var fe *idem.FailureError
	return errors.As(err, &fe) && fe.Replayed
}

func (m *Middleware) errorProblem(ctx context.Context, scope string, err error, in *input) *Problem {
	retry := retrySeconds(m.engine.Config().RetryAfter)
	var (
		me *idem.MismatchError
		fe *idem.InFlightError
		ue *idem.UnknownOutcomeError
		se *idem.ScopeError
		te *idem.IntentTooLargeError
	)
	switch {
	case errors.As(err, &me):
		p := problem(TypeKeyMismatch, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different request",
			"this key was already used with a different method, route or body; use a new key for a new request")
		p.Fields = m.mismatchFields(scope, me.Record, in)
		if m.cfg.Compat == CompatStripe {
			stripeMismatch(p, me.Key)
		}
		return p
	case errors.As(err, &fe):
		p := problem(TypeInFlight, http.StatusConflict, "request in flight",
			"a request with this key is being processed; retry after the indicated delay")
		p.RetryAfter = retrySeconds(fe.RetryAfter)
		return p
	case errors.As(err, &ue):
		// No Retry-After: waiting does not resolve an unknown outcome,
		// recovery or an operator does.
		return problem(TypeOutcomeUnknown, http.StatusConflict, "outcome unknown",
			"the first request with this key may or may not have been applied; it will not be run again until its outcome is resolved (do not retry it with a new key)")
	case errors.As(err, &te):
		return problem(TypeIntentTooLarge, http.StatusRequestEntityTooLarge, "request intent too large",
			fmt.Sprintf("what this request records with its key (%d bytes) exceeds the server's bound of %d bytes; nothing was claimed: send a smaller request", te.Size, te.Max))
	case errors.Is(err, idem.ErrInvalidKey):
		return problem(TypeKeyInvalid, http.StatusBadRequest, "invalid Idempotency-Key", keyReason(err))
	case errors.As(err, &se):
		// The engine refused the scope before claiming anything.
		return problem(TypeScopeInvalid, http.StatusBadRequest, "invalid scope",
			"the principal this request's key is scoped by cannot be used as a scope: "+se.Reason)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		// A store call cut short because the client went away is not the
		// store's failure.
		errors.Is(err, idem.ErrStoreUnavailable) && errors.Is(ctx.Err(), context.Canceled):
		return m.cancelled(ctx, err, "the request's context ended before it was run or replayed; it was not run and may be retried with the same key")
	case errors.Is(err, ErrScopeQuota):
		return quotaProblem(err)
	case errors.Is(err, idem.ErrRecordUnreadable):
		// Encrypted under a key this engine's keyring does not hold, or
		// altered: the record stands, and is neither served nor re-run.
		m.cfg.Logger.Error("idemhttp: record cannot be decrypted", "err", err)
		detail := "this key has a record, but it cannot be decrypted here; it will not be run again"
		if errors.Is(err, idem.ErrUnknownKey) {
			var oe *idem.OpenError
			if errors.As(err, &oe) {
				detail = "this key has a record encrypted with key id " + strconv.Quote(oe.KeyID) +
					", which this server's keyring does not hold; it will not be run again"
			}
		}
		return problem(TypeRecordUnreadable, http.StatusInternalServerError, "recorded response unreadable", detail)
	case errors.Is(err, idem.ErrStoreUnavailable), errors.Is(err, idem.ErrClosed):
		p := problem(TypeStoreUnavailable, http.StatusServiceUnavailable, "idempotency store unavailable",
			"the request was not run: it cannot be protected against duplicates right now")
		p.RetryAfter = retry
		return p
	}
	m.cfg.Logger.Error("idemhttp: unexpected engine error", "err", err)
	return problem(TypeInternal, http.StatusInternalServerError, "internal error", "")
}

// StatusClientClosedRequest is the status of a [TypeRequestCancelled]
// problem when the client went away: 499, nginx's "Client Closed Request".
// It is not a registered status; it is chosen so that access logs and
// metrics tell a client that left from a server that failed (5xx) or a
// request that was wrong (other 4xx). Nobody is left to read it.
const StatusClientClosedRequest = 499

// cancelled is the problem for a request whose context ended before it was
// run: 499 when the client went away, 503 with Retry-After when a deadline
// set on the server's side passed (the client may still be waiting, and
// may retry).
func (m *Middleware) cancelled(ctx context.Context, err error, detail string) *Problem {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		p := problem(TypeRequestCancelled, http.StatusServiceUnavailable, "request cancelled", detail)
		p.RetryAfter = retrySeconds(m.engine.Config().RetryAfter)
		return p
	}
	return problem(TypeRequestCancelled, StatusClientClosedRequest, "request cancelled", detail)
}

// mismatchFields names the top-level JSON members or form fields that
// differ between the request that first used the key and this one, when
// both bodies are JSON objects or both forms, from digests keyed for the
// request's scope (see digestkey.go).
// Only names are returned, never values; none in the global scope, or for a
// record keyed with another secret.
func (m *Middleware) mismatchFields(scope string, rec *idem.Record, in *input) []string {
	if scope == "" || rec == nil || !in.fields || in.digests == nil {
		return nil
	}
	intent, err := idem.DecodeIntent(rec.Intent)
	if err != nil || intent == nil {
		return nil
	}
	// Nil when the first body was not a JSON object (no stored digests) or
	// was keyed with another secret.
	return m.digests.Diff(intent.Fields[keyedDigestsField], scope, idem.Digests(*in.digests))
}

// replay writes a recorded response.
func (m *Middleware) replay(w http.ResponseWriter, r *http.Request, b []byte) {
	v, err := parseRecord(b)
	if err != nil {
		m.unreadable(w, err)
		return
	}
	h := w.Header()
	if v.tooLarge {
		h.Set(ReplayedHeader, "true")
		loc := ""
		v.eachHeader(nil, func(name string, vals []string) {
			if name == "Location" && len(vals) > 0 {
				loc = vals[0]
			}
		})
		m.replayTooLarge(w, loc, v.status, v.size)
		return
	}
	// One slice holds the replayed marker's value and every recorded one.
	all := make([]string, 1+v.nValues)
	all[0] = "true"
	h[ReplayedHeader] = all[:1:1]
	v.eachHeader(all[1:], func(name string, vals []string) {
		if ck := http.CanonicalHeaderKey(name); !neverRecorded[ck] {
			h[ck] = vals
		}
	})
	m.sendReplay(w, r, v.status, v.body)
}

func (m *Middleware) unreadable(w http.ResponseWriter, err error) {
	m.cfg.Logger.Error("idemhttp: recorded response unreadable", "err", err)
	WriteProblem(w, problem(TypeRecordUnreadable, http.StatusInternalServerError, "recorded response unreadable",
		"this key has a record, but its response cannot be decoded; it will not be run again"))
}

// replayTooLarge answers for a response that was sent but too large to
// record, keeping its status and Location.
func (m *Middleware) replayTooLarge(w http.ResponseWriter, loc string, status int, size int64) {
	if loc != "" {
		w.Header().Set("Location", loc)
	}
	p := problem(TypeResponseTooLarge, status, "response too large to replay",
		"the request with this key was applied with status "+strconv.Itoa(status)+
			", but its response ("+strconv.FormatInt(size, 10)+" bytes) was too large to record; do not retry it with a new key")
	p.RecordedStatus = status
	WriteProblem(w, p)
}
