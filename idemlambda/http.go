package idemlambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Request is the part of an HTTP event (API Gateway v1 or v2, Function
// URL) that keys, scopes and fingerprints it.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Route is the route the request matched: the resource ("/orders/{id}")
	// for API Gateway v1, the route key ("POST /orders") for v2, the raw
	// path for a Function URL.
	Route string
	// Principal is who the request was authenticated as, where the event
	// says: a JWT authorizer's sub claim, an IAM caller's user ARN, a Lambda
	// authorizer's principalId, a Cognito authorizer's sub. Empty when none.
	Principal string
	// Body is the request body, base64-decoded when the event says it is
	// encoded.
	Body []byte

	headers map[string]string // lower-cased names
	event   any
	once    sync.Once
	doc     any
	docErr  error
}

// Header returns a request header's value (names are case-insensitive).
func (r *Request) Header(name string) string { return r.headers[strings.ToLower(name)] }

// Lookup returns what p finds in the event as the Lambda runtime handed
// it (JSON), entering JSON strings such as the body.
func (r *Request) Lookup(p Pointer) (any, error) {
	r.once.Do(func() {
		b, err := json.Marshal(r.event)
		if err != nil {
			r.docErr = err
			return
		}
		r.doc, r.docErr = decodeJSON(b)
	})
	if r.docErr != nil {
		return nil, r.docErr
	}
	return p.Lookup(r.doc)
}

func lowerHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

func decodeBody(body string, b64 bool) ([]byte, error) {
	if !b64 {
		return []byte(body), nil
	}
	return base64.StdEncoding.DecodeString(body)
}

// response is an HTTP answer as the wrappers record and replay it.
type response struct {
	Status  int                 `json:"s"`
	Headers map[string]string   `json:"h,omitempty"`
	Multi   map[string][]string `json:"m,omitempty"`
	Body    string              `json:"b,omitempty"`
	B64     bool                `json:"e,omitempty"`
	Cookies []string            `json:"c,omitempty"`
}

// HTTP wraps Lambda handlers of HTTP events so that each request with an
// idempotency key runs its effect at most once and its duplicates get
// the recorded response, with Idempotent-Replayed: true.
//
// A handler's answer decides the record: a response is recorded (and
// replayed), unless its status is one of Config.ReleaseStatuses (nothing
// applied: released); an error wrapped with idem.Release releases, one
// wrapped with idem.Unknown or an effect cut by its bound (the Lambda
// deadline less Config.DeadlineMargin) is unknown — never re-run — and
// any other error is recorded failed and returned (to Lambda) on the first
// run and on every replay. Refusals are RFC 9457 problems with idemhttp's
// types: 400 key-missing or key-invalid, 401 scope-missing, 409 in-flight
// (Retry-After) or outcome-unknown, 422 key-mismatch, 503
// store-unavailable, 504 outcome-unknown for an effect the deadline cut.
type HTTP struct {
	cfg Config
	pointers
}

// NewHTTP returns the HTTP wrappers for cfg.
func NewHTTP(cfg Config) (*HTTP, error) {
	ptrs, err := cfg.fill("lambda")
	if err != nil {
		return nil, err
	}
	return &HTTP{cfg: cfg, pointers: ptrs}, nil
}

// errNotApplied is the release cause for a status in ReleaseStatuses.
var errNotApplied = errors.New("idemlambda: the handler's status says nothing was applied")

// serve runs one request through the engine.
func (w *HTTP) serve(ctx context.Context, r *Request, run func(context.Context) (response, error)) (response, error) {
	key, present, err := w.key(r)
	switch {
	case err != nil:
		return problemResponse(idemhttp.TypeKeyInvalid, http.StatusBadRequest, "invalid idempotency key", err.Error(), 0), nil
	case !present && w.cfg.Optional:
		return run(ctx)
	case !present:
		return problemResponse(idemhttp.TypeKeyMissing, http.StatusBadRequest, "idempotency key missing",
			"this operation requires an idempotency key ("+w.keySource()+")", 0), nil
	}
	scope, err := w.cfg.Scope(r)
	if err != nil {
		return problemResponse(idemhttp.TypeScopeMissing, http.StatusUnauthorized, "no principal", err.Error(), 0), nil
	}
	fp, err := w.fingerprint(r)
	if err != nil {
		return problemResponse(idemhttp.TypeBodyInvalidJSON, http.StatusBadRequest, "request body is not valid JSON",
			"a JSON body is fingerprinted in its canonical form: "+err.Error(), 0), nil
	}
	pol, err := bound(ctx, w.cfg.Policy, w.cfg.Engine.Config().EffectTimeout, w.cfg.DeadlineMargin, time.Now())
	if err != nil {
		return problemResponse(idemhttp.TypeStoreUnavailable, http.StatusServiceUnavailable, "no time left",
			err.Error()+"; nothing was claimed: retry with the same key", 1), nil
	}
	req := idem.Request{Scope: scope, Key: key, Fingerprint: fp, Operation: w.cfg.Operation, Policy: pol}
	// Set by the effect, which the engine may run on another goroutine.
	var released atomic.Pointer[response]
	var ran atomic.Bool
	res, err := w.cfg.Engine.DoBytes(ctx, req, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
		ran.Store(true)
		resp, err := run(ctx)
		if err != nil {
			return nil, err
		}
		if slices.Contains(w.cfg.ReleaseStatuses, resp.Status) {
			released.Store(&resp)
			return nil, idem.Release(fmt.Errorf("%w (status %d)", errNotApplied, resp.Status))
		}
		return json.Marshal(resp)
	})
	if err != nil {
		if rel := released.Load(); rel != nil && errors.Is(err, errNotApplied) {
			return *rel, nil
		}
		return w.refusal(err, ran.Load())
	}
	var resp response
	if err := json.Unmarshal(res.Value, &resp); err != nil {
		return response{}, fmt.Errorf("idemlambda: recorded response of key %q unreadable: %w", key, err)
	}
	if res.Replayed {
		if resp.Headers == nil {
			resp.Headers = map[string]string{}
		}
		resp.Headers["Idempotent-Replayed"] = "true"
	}
	return resp, nil
}

func (w *HTTP) keySource() string {
	if w.keyPtr != nil {
		return "at " + w.keyPtr.String() + " in the event"
	}
	return "header " + w.cfg.KeyHeader
}

// key reads the request's key: at Config.KeyPointer, or from the header.
func (w *HTTP) key(r *Request) (idem.Key, bool, error) {
	if w.keyPtr != nil {
		v, err := r.Lookup(*w.keyPtr)
		if err != nil {
			return "", false, nil // absent: the caller decides (Optional)
		}
		s, err := keyString(v)
		if err != nil {
			return "", true, err
		}
		k, err := idem.ParseKey(s)
		return k, true, err
	}
	h := r.Header(w.cfg.KeyHeader)
	if h == "" {
		return "", false, nil
	}
	k, err := idemhttp.ParseKeyHeader(h)
	return k, true, err
}

// fingerprint hashes the request: method, route and the values at
// Config.FingerprintPointers, or method, route and body.
func (w *HTTP) fingerprint(r *Request) (idem.Fingerprint, error) {
	if len(w.fpPtrs) == 0 {
		fp, _, err := idem.FingerprintBody(r.Method, r.Route, r.Body, idemhttp.IsJSONContentType(r.Header("Content-Type")))
		return fp, err
	}
	return pointerFingerprint(r.Lookup, w.fpPtrs, r.Method, r.Route)
}

// pointerFingerprint hashes the canonical JSON of the prefix strings and
// of the values the pointers find (null where one finds nothing).
func pointerFingerprint(lookup func(Pointer) (any, error), ptrs []Pointer, prefix ...string) (idem.Fingerprint, error) {
	vals := make([]any, 0, len(prefix)+len(ptrs))
	for _, p := range prefix {
		vals = append(vals, p)
	}
	for _, p := range ptrs {
		v, err := lookup(p)
		if err != nil {
			v = nil
		}
		vals = append(vals, v)
	}
	b, err := json.Marshal(vals)
	if err != nil {
		return idem.Fingerprint{}, err
	}
	c, err := idem.CanonicalJSON(b)
	if err != nil {
		return idem.Fingerprint{}, err
	}
	return idem.NewFingerprint(c), nil
}

// refusal answers an engine error: a problem response, or the error
// itself for a recorded failure (Lambda reports it, on replays too). ran
// says the effect ran in this invocation: an unknown outcome is then
// this invocation's (504), not a replay of an earlier one (409).
func (w *HTTP) refusal(err error, ran bool) (response, error) {
	var (
		me *idem.MismatchError
		fe *idem.InFlightError
		ue *idem.UnknownOutcomeError
		fa *idem.FailureError
	)
	switch {
	case errors.As(err, &fa):
		return response{}, err
	case errors.As(err, &me):
		return problemResponse(idemhttp.TypeKeyMismatch, http.StatusUnprocessableEntity, "idempotency key reused with a different request",
			"this key was already used with a different request; use a new key for a new request", 0), nil
	case errors.As(err, &fe):
		return problemResponse(idemhttp.TypeInFlight, http.StatusConflict, "request in flight",
			"a request with this key is being processed; retry after the indicated delay", retrySeconds(fe.RetryAfter)), nil
	case ran && (errors.As(err, &ue) || errors.Is(err, idem.ErrUnknown) || errors.Is(err, context.DeadlineExceeded)):
		return problemResponse(idemhttp.TypeOutcomeUnknown, http.StatusGatewayTimeout, "outcome unknown",
			"the effect did not finish within the invocation's time; it may or may not have been applied, and a retry will not run it again", 0), nil
	case errors.As(err, &ue):
		return problemResponse(idemhttp.TypeOutcomeUnknown, http.StatusConflict, "outcome unknown",
			"the first request with this key may or may not have been applied; it will not be run again until its outcome is resolved", 0), nil
	case errors.Is(err, idem.ErrInvalidKey):
		return problemResponse(idemhttp.TypeKeyInvalid, http.StatusBadRequest, "invalid idempotency key", err.Error(), 0), nil
	case errors.Is(err, idem.ErrReleased):
		return response{}, err
	case errors.Is(err, idem.ErrStoreUnavailable), errors.Is(err, idem.ErrClosed):
		return problemResponse(idemhttp.TypeStoreUnavailable, http.StatusServiceUnavailable, "idempotency store unavailable",
			"the request was not run: it cannot be protected against duplicates right now", 1), nil
	}
	return response{}, err
}

func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// problemResponse is an RFC 9457 problem as a response.
func problemResponse(typ string, status int, title, detail string, retry int) response {
	p := idemhttp.Problem{Type: typ, Title: title, Status: status, Detail: detail, RetryAfter: retry}
	b, _ := json.Marshal(p)
	h := map[string]string{"Content-Type": idemhttp.ProblemContentType}
	if retry > 0 {
		h["Retry-After"] = strconv.Itoa(retry)
	}
	return response{Status: status, Headers: h, Body: string(b)}
}
