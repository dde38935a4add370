package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/idemkit/idem"
)

// Middleware makes the requests its rules select idempotent: the first
// request with a key runs the handler and records its response; a
// duplicate gets the recorded response with Idempotent-Replayed: true.
type Middleware struct {
	engine *idem.Engine
	cfg    Config
	allow  map[string]bool
}

// New returns a middleware running intents through engine. It fails when
// cfg is invalid, including a nil Scope.
func New(engine *idem.Engine, cfg Config) (*Middleware, error) {
	if engine == nil {
		return nil, errors.New("idemhttp: New: engine is nil")
	}
	if err := cfg.fill(engine.Config().Logger); err != nil {
		return nil, err
	}
	allow, err := allowList(cfg.RecordHeaders)
	if err != nil {
		return nil, err
	}
	return &Middleware{engine: engine, cfg: cfg, allow: allow}, nil
}

// Handler wraps next. It works with any router that takes net/http
// middleware (chi, gorilla/mux, and echo or gin through their adapters).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) rule(r *http.Request) *Rule {
	if safeMethod(r.Method) {
		return nil
	}
	for i := range m.cfg.Rules {
		if ru := &m.cfg.Rules[i]; ru.matches(r) {
			if ru.Requirement == Exempt {
				return nil
			}
			return ru
		}
	}
	return nil
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ru := m.rule(r)
	if ru == nil {
		next.ServeHTTP(w, r)
		return
	}
	key, err := KeyFromHeader(r.Header)
	switch {
	case errors.Is(err, ErrNoKey) && ru.Requirement == Optional:
		next.ServeHTTP(w, r)
		return
	case errors.Is(err, ErrNoKey):
		WriteProblem(w, problem(TypeKeyMissing, http.StatusBadRequest, "Idempotency-Key required",
			"this request must carry an Idempotency-Key header (a structured-field string such as \"8e03978e\")"))
		return
	case err != nil:
		WriteProblem(w, problem(TypeKeyInvalid, http.StatusBadRequest, "invalid Idempotency-Key", keyReason(err)))
		return
	}
	scope, err := m.cfg.Scope(r)
	if err != nil {
		WriteProblem(w, problem(TypeScopeMissing, http.StatusUnauthorized, "no principal for the key",
			"keys are scoped to the authenticated principal, and this request has none"))
		return
	}
	in, p := m.prepare(r)
	if p != nil {
		WriteProblem(w, p)
		return
	}
	req := idem.Request{Scope: scope, Key: key, Fingerprint: in.fp, Operation: ru.operation(r.Method),
		Intent: &idem.Intent{Operation: ru.operation(r.Method), Fields: in.digestFields()}, Policy: ru.Policy}
	m.run(w, r, next, req, in)
}

// keyReason is the client-facing reason of a key error.
func keyReason(err error) string {
	var ke *idem.KeyError
	if errors.As(err, &ke) {
		return "the Idempotency-Key header is invalid: " + ke.Reason
	}
	return "the Idempotency-Key header is invalid"
}

// input is the request as read once: body and fingerprint.
type input struct {
	body    []byte
	fp      idem.Fingerprint
	digests map[string]string
}

// digestPrefix marks per-field body digests in the record's Intent.Fields.
const digestPrefix = "body:"

func (in *input) digestFields() map[string]string {
	if len(in.digests) == 0 {
		return nil
	}
	f := make(map[string]string, len(in.digests))
	for k, v := range in.digests {
		f[digestPrefix+k] = v
	}
	return f
}

// prepare reads the body (bounded) and fingerprints the request. It
// answers 413 before anything is claimed.
func (m *Middleware) prepare(r *http.Request) (*input, *Problem) {
	tooLarge := problem(TypeBodyTooLarge, http.StatusRequestEntityTooLarge, "request body too large",
		fmt.Sprintf("the request body exceeds %d bytes", m.cfg.MaxBody))
	if r.ContentLength > m.cfg.MaxBody {
		return nil, tooLarge
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBody+1))
		_ = r.Body.Close()
		if err != nil {
			return nil, problem("about:blank", http.StatusBadRequest, "request body unreadable", "")
		}
		if int64(len(b)) > m.cfg.MaxBody {
			return nil, tooLarge
		}
		body = b
	}
	isJSON := len(body) > 0 && idem.IsJSONContentType(r.Header.Get("Content-Type"))
	fp, err := idem.FingerprintRequest(r.Method, m.cfg.Route(r), body, isJSON)
	if err != nil {
		return nil, problem(TypeBodyInvalidJSON, http.StatusBadRequest, "invalid JSON body",
			"the body is declared as JSON but is not valid JSON: "+jsonReason(err))
	}
	in := &input{body: body, fp: fp}
	if isJSON {
		in.digests, _ = idem.TopLevelDigests(body) // nil unless an object
	}
	return in, nil
}

func jsonReason(err error) string {
	var je *idem.JSONError
	if errors.As(err, &je) {
		return fmt.Sprintf("%s at offset %d", je.Reason, je.Offset)
	}
	return "malformed"
}

// run executes the intent and answers the client.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, req idem.Request, in *input) {
	ctl := &control{}
	var rec *recorder
	if m.cfg.RecoverPanics {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // sentinel value compared as net/http does
					panic(p)
				}
				m.cfg.Logger.Error("idemhttp: handler panicked; record marked unknown", "panic", fmt.Sprint(p))
				if rec == nil || !rec.wrote {
					WriteProblem(w, problem("about:blank", http.StatusInternalServerError, "internal error", ""))
				}
			}
		}()
	}
	res, err := m.engine.DoBytes(r.Context(), req, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		ctl.attempt = a
		rec = newRecorder(w, m.allow, m.cfg.MaxResponse)
		r2 := r.WithContext(context.WithValue(ctx, ctxKey{}, ctl))
		r2.Body = io.NopCloser(bytes.NewReader(in.body))
		r2.ContentLength = int64(len(in.body))
		r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(in.body)), nil }
		next.ServeHTTP(rec, r2)
		return m.outcome(ctl, rec)
	})
	if rec != nil {
		// The handler ran and its response went to the client as written;
		// all that is left is to report what could not be recorded.
		if err != nil && !errors.Is(err, idem.ErrReleased) && !errors.Is(err, idem.ErrUnknownOutcome) && !errors.Is(err, idem.ErrUnknown) {
			m.cfg.Logger.Error("idemhttp: response sent but its outcome was not recorded; the record becomes unknown after its lease", "err", err)
		}
		return
	}
	m.answer(w, r, res, err, in)
}

var errMarkedUnknown = errors.New("idemhttp: handler marked the outcome unknown")

// outcome maps what the handler did to the engine's vocabulary.
func (m *Middleware) outcome(ctl *control, rec *recorder) ([]byte, error) {
	release, unknown := ctl.decision()
	rr := rec.response()
	switch {
	case unknown:
		return nil, idem.Unknown(errMarkedUnknown)
	case release || slices.Contains(m.cfg.ReleaseStatuses, rr.Status):
		return nil, idem.Release(nil)
	}
	b, err := rr.Encode()
	if err != nil {
		return nil, idem.Unknown(err) // applied, but unrecordable
	}
	return b, nil
}
