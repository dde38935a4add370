package idemhttp

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProblemBase prefixes every problem type URI. Each type is documented in
// docs/http.md under the anchor named by the URI's last segment.
const ProblemBase = "https://github.com/idemkit/idem/blob/main/docs/http.md#"

// Problem type URIs. They are stable: clients may compare them.
const (
	// TypeKeyMissing: a route that requires a key got none (400).
	TypeKeyMissing = ProblemBase + "key-missing"
	// TypeKeyInvalid: the Idempotency-Key header is malformed, repeated,
	// empty or longer than 255 bytes (400).
	TypeKeyInvalid = ProblemBase + "key-invalid"
	// TypeBodyTooLarge: the request body exceeds the limit; nothing was
	// claimed (413).
	TypeBodyTooLarge = ProblemBase + "body-too-large"
	// TypeIntentTooLarge: the intent journal written with the claim (the
	// operation, the body's digests and the Config.Intent hook's fields)
	// exceeds the engine's Config.MaxIntent; nothing was claimed (413).
	TypeIntentTooLarge = ProblemBase + "intent-too-large"
	// TypeBodyInvalidJSON: the body is declared JSON but is not valid JSON,
	// so it has no canonical form to fingerprint (400).
	TypeBodyInvalidJSON = ProblemBase + "body-invalid-json"
	// TypeKeyMismatch: the key was already used with a different request
	// (422; 400 under [CompatStripe]). The "fields" member names the
	// differing top-level JSON members or form fields.
	TypeKeyMismatch = ProblemBase + "key-mismatch"
	// TypeInFlight: a request with this key is being processed (409, with
	// Retry-After).
	TypeInFlight = ProblemBase + "in-flight"
	// TypeOutcomeUnknown: the first attempt's outcome could not be decided
	// (lease expired, crash, upstream timeout). It is never re-run; it waits
	// for recovery or an operator (409, without Retry-After: waiting does
	// not resolve it, and a client that honours Retry-After would poll a
	// record only an operator changes).
	TypeOutcomeUnknown = ProblemBase + "outcome-unknown"
	// TypeStoreUnavailable: the record store could not be reached; the
	// request was not run (503, with Retry-After).
	TypeStoreUnavailable = ProblemBase + "store-unavailable"
	// TypeResponseTooLarge: the request was applied, but its response was
	// too large to record, so a replay cannot repeat it. The replay carries
	// the recorded status (never an error status for an applied request).
	TypeResponseTooLarge = ProblemBase + "response-too-large"
	// TypeScopeMissing: the request carries no principal to scope its key
	// by (401).
	TypeScopeMissing = ProblemBase + "scope-missing"
	// TypeScopeUnauthenticated: the request's credentials do not
	// authenticate it — no bearer token, or one that is expired, not yet
	// valid, for another audience or not signed by a trusted key — so it
	// has no principal to scope its key by; nothing was claimed (401, with
	// WWW-Authenticate). See [UnauthenticatedError].
	TypeScopeUnauthenticated = ProblemBase + "scope-unauthenticated"
	// TypeUpstreamUnreachable: the proxy could not send the request to its
	// upstream; nothing was applied and the key was released (502).
	TypeUpstreamUnreachable = ProblemBase + "upstream-unreachable"
	// TypeUpstreamTimeout: the proxy sent the request but got no answer;
	// the outcome is unknown and retries get 409 (504).
	TypeUpstreamTimeout = ProblemBase + "upstream-timeout"
	// TypeRecordUnreadable: a record exists but its response cannot be
	// decoded, or cannot be decrypted (encrypted at rest under a key id
	// the engine's keyring does not hold, or altered); it is not run
	// again (500).
	TypeRecordUnreadable = ProblemBase + "record-unreadable"
	// TypeBodyUnreadable: reading the request body failed (the client
	// went away or sent a malformed chunked body); nothing was claimed
	// (400).
	TypeBodyUnreadable = ProblemBase + "body-unreadable"
	// TypeRequestCancelled: the client went away (closed, half-closed or
	// reset its connection, also while sending the body) or the request's
	// context ended before it was run or replayed, e.g. while it waited for
	// a duplicate in flight; nothing was claimed for it, or its claim was
	// released ([StatusClientClosedRequest], 499; 503 with Retry-After
	// when a server-side deadline passed). It is not a store error.
	TypeRequestCancelled = ProblemBase + "request-cancelled"
	// TypeUpgradeRefused: a request with a key asked to switch protocols
	// (an Upgrade header); nothing was claimed (400).
	TypeUpgradeRefused = ProblemBase + "upgrade-refused"
	// TypeEncodingNotAcceptable: the recorded response has a content
	// coding the request's Accept-Encoding does not accept and that cannot
	// be decoded for it (406). The request was applied: retry with an
	// Accept-Encoding that accepts the coding named.
	TypeEncodingNotAcceptable = ProblemBase + "encoding-not-acceptable"
	// TypeScopeInvalid: the scope the request maps to (Config.Scope) is
	// not one idem can keep: longer than 255 bytes, not UTF-8, or with a
	// control character (see idem.ValidateScope); nothing was claimed
	// (400).
	TypeScopeInvalid = ProblemBase + "scope-invalid"
	// TypeScopeQuota: the request's scope is over a [ScopeQuota] (requests
	// running at once, or new keys per minute); it was not run and
	// nothing was recorded: retry after the indicated delay (429, with
	// Retry-After).
	TypeScopeQuota = ProblemBase + "scope-quota"
	// TypeInternal: the middleware failed in a way it did not expect (an
	// unexpected engine error, or a handler panic with RecoverPanics
	// before a response was written); it is logged (500).
	TypeInternal = ProblemBase + "internal-error"
)

// ProblemContentType is the media type of problem documents (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details document.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Fields names the top-level JSON members that differ from the request
	// that first used the key (key-mismatch only). Values are never echoed.
	Fields []string `json:"fields,omitempty"`
	// RetryAfter mirrors the Retry-After header, in seconds.
	RetryAfter int `json:"retry_after,omitempty"`
	// RecordedStatus is the status of the applied request whose response
	// could not be recorded (response-too-large only).
	RecordedStatus int `json:"recorded_status,omitempty"`
	// Error repeats the problem in the shape Stripe-style SDKs look for:
	// they raise an error only when the JSON body carries an "error"
	// member, and would otherwise take a problem for a resource. Set by
	// WriteProblem from Type when nil.
	Error *ProblemError `json:"error,omitempty"`
}

// ProblemError is the "error" extension member of a [Problem], in Stripe's
// vocabulary where it has one.
type ProblemError struct {
	// Type is Stripe's error type: idempotency_error, invalid_request_error
	// or api_error.
	Type string `json:"type"`
	// Code is stable per problem type: Stripe's code where it has one
	// (idempotency_key_in_use), else the problem type's anchor with
	// underscores (outcome_unknown).
	Code string `json:"code"`
	// Message is the problem's detail (or title).
	Message string `json:"message"`
	// Param names the one request parameter the error is about, as
	// Stripe's errors do: under [CompatStripe], the one field a reused
	// key's request changed.
	Param string `json:"param,omitempty"`
}

// stripeError says how a problem type reads to a Stripe-style client: its
// error type and code, and whether the Stripe-Should-Retry header tells
// such a client (which retries 409 and 5xx by itself, ignoring
// Retry-After) to retry ("true"), not to ("false"), or nothing ("").
type stripeError struct{ typ, code, retry string }

var stripeErrors = map[string]stripeError{
	TypeKeyMissing:            {"invalid_request_error", "idempotency_key_missing", "false"},
	TypeKeyInvalid:            {"invalid_request_error", "idempotency_key_invalid", "false"},
	TypeBodyTooLarge:          {"invalid_request_error", "body_too_large", "false"},
	TypeBodyInvalidJSON:       {"invalid_request_error", "body_invalid_json", "false"},
	TypeIntentTooLarge:        {"invalid_request_error", "intent_too_large", "false"},
	TypeBodyUnreadable:        {"invalid_request_error", "body_unreadable", ""},
	TypeKeyMismatch:           {"invalid_request_error", "idempotency_key_mismatch", "false"},
	TypeInFlight:              {"idempotency_error", "idempotency_key_in_use", "true"},
	TypeOutcomeUnknown:        {"idempotency_error", "idempotency_outcome_unknown", "false"},
	TypeStoreUnavailable:      {"api_error", "store_unavailable", "true"},
	TypeRequestCancelled:      {"api_error", "request_cancelled", "true"},
	TypeResponseTooLarge:      {"idempotency_error", "response_too_large", "false"},
	TypeScopeMissing:          {"invalid_request_error", "scope_missing", "false"},
	TypeScopeInvalid:          {"invalid_request_error", "scope_invalid", "false"},
	TypeScopeUnauthenticated:  {"invalid_request_error", "scope_unauthenticated", "false"},
	TypeUpstreamUnreachable:   {"api_error", "upstream_unreachable", "true"},
	TypeUpstreamTimeout:       {"api_error", "upstream_timeout", "false"},
	TypeRecordUnreadable:      {"api_error", "record_unreadable", "false"},
	TypeInternal:              {"api_error", "internal_error", ""},
	TypeScopeQuota:            {"invalid_request_error", "rate_limit", "true"},
	TypeUpgradeRefused:        {"invalid_request_error", "upgrade_refused", "false"},
	TypeEncodingNotAcceptable: {"invalid_request_error", "encoding_not_acceptable", "false"},
}

// stripeFor returns the Stripe-style reading of a problem type; a type
// idem does not define (a caller's own) reads as an api_error whose code
// is the type's last path segment or anchor.
func stripeFor(typ string) stripeError {
	if se, ok := stripeErrors[typ]; ok {
		return se
	}
	code := typ
	if i := strings.LastIndexAny(code, "#/"); i >= 0 {
		code = code[i+1:]
	}
	return stripeError{typ: "api_error", code: strings.ReplaceAll(code, "-", "_")}
}

// WriteProblem writes p as application/problem+json with status p.Status,
// and a Retry-After header when p.RetryAfter is set. It fills p.Error when
// nil, and sets Stripe-Should-Retry where a Stripe-style client's own
// retry rule (every 409 and 5xx) would be wrong or too timid: "false" for
// outcome-unknown and the client errors a retry cannot fix, "true" for
// in-flight and store-unavailable.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	se := stripeFor(p.Type)
	if p.Error == nil {
		msg := p.Detail
		if msg == "" {
			msg = p.Title
		}
		p.Error = &ProblemError{Type: se.typ, Code: se.code, Message: msg}
	}
	if se.retry != "" {
		h.Set("Stripe-Should-Retry", se.retry)
	}
	b, _ := json.Marshal(p) // a Problem always marshals
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}

// retrySeconds rounds d up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

func problem(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}
