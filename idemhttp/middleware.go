package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/idemkit/idem"
)

// Middleware makes the requests its rules select idempotent: the first
// request with a key runs the handler and records its response; a
// duplicate gets the recorded response with Idempotent-Replayed: true.
type Middleware struct {
	engine *idem.Engine
	cfg    Config
	allow  map[string]bool
	obs    idem.Observer // the engine's
	hasher idem.BodyHasher
	// digests keys the per-field digests (Config.DigestSecret, or a
	// random one).
	digests *idem.DigestKey
	quota   *quotas // nil without Config.ScopeQuota
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
	extra := cfg.RecordHeaders
	if cfg.Compat == CompatStripe {
		extra = append(slices.Clip(extra), StripeRecordHeaders...)
	}
	allow, err := allowList(extra)
	if err != nil {
		return nil, err
	}
	digests, err := idem.NewDigestKey(cfg.DigestSecret)
	if err != nil {
		return nil, fmt.Errorf("idemhttp: Config.DigestSecret: %w", err)
	}
	return &Middleware{engine: engine, cfg: cfg, allow: allow, obs: engine.Config().Observer,
		hasher: idem.BodyHasher{MaxDigests: cfg.MaxDigests}, digests: digests,
		quota: newQuotas(cfg.ScopeQuota, engine.Config().RetryAfter)}, nil
}

// Handler wraps next. It works with any router that takes net/http
// middleware (chi, gorilla/mux, and echo or gin through their adapters).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// rule is the rule that protects r, whose method, upper-cased, is method;
// nil when r is exempt.
func (m *Middleware) rule(method string, r *http.Request) *Rule {
	if safeMethod(method) {
		return nil
	}
	for i := range m.cfg.Rules {
		if ru := &m.cfg.Rules[i]; ru.matches(method, r) {
			if ru.Requirement == Exempt {
				return nil
			}
			return ru
		}
	}
	return nil
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	// Method names are case-sensitive in HTTP, but "post" is nobody's
	// other method: it is matched, fingerprinted, counted and handled as
	// "POST", so both spellings share one record and one metric label.
	method := strings.ToUpper(r.Method) // no allocation when already upper case
	ru := m.rule(method, r)
	if ru == nil {
		next.ServeHTTP(w, r)
		return
	}
	if m.cfg.Compat == CompatStripe {
		w = &stripeWriter{ResponseWriter: w, key: r.Header.Get(HeaderName)}
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
	if len(r.Header["Upgrade"]) > 0 {
		// A switched protocol's exchange cannot be recorded or replayed:
		// refuse before anything is claimed, rather than leave an unknown.
		WriteProblem(w, problem(TypeUpgradeRefused, http.StatusBadRequest, "protocol upgrade refused",
			"a request carrying an Idempotency-Key cannot switch protocols (Upgrade: "+r.Header.Get("Upgrade")+
				"); nothing was claimed: send it without the Upgrade header"))
		return
	}
	if method != r.Method {
		r = r.WithContext(r.Context()) // a shallow copy, so as not to change the caller's
		r.Method = method
	}
	scope, err := m.cfg.Scope(r)
	if err != nil {
		WriteProblem(w, scopeProblem(w, err))
		return
	}
	c := &call{m: m, w: w, r: r, next: next, scope: scope}
	defer c.in.release()
	if p := m.prepare(r, scope, &c.in); p != nil {
		WriteProblem(w, p)
		return
	}
	op := ru.operation(r.Method)
	c.intent.Operation = op
	// The intent is built only when a claim is about to be written: a
	// replay from the engine's cache needs no per-member digests.
	req := idem.Request{Scope: scope, Key: key, Fingerprint: c.in.fp, Operation: op,
		LazyIntent: c, Policy: ru.Policy}
	c.run(req)
}

// scopeProblem is the problem for a request Config.Scope refused, with
// the WWW-Authenticate challenge of an *UnauthenticatedError set on w.
func scopeProblem(w http.ResponseWriter, err error) *Problem {
	var ue *UnauthenticatedError
	if errors.As(err, &ue) {
		w.Header().Set("WWW-Authenticate", ue.challenge())
		return problem(TypeScopeUnauthenticated, http.StatusUnauthorized, "not authenticated",
			ue.reason()+"; nothing was claimed")
	}
	return problem(TypeScopeMissing, http.StatusUnauthorized, "no principal for the key",
		"keys are scoped to the authenticated principal, and this request has none")
}

// keyReason is the client-facing reason of a key error.
func keyReason(err error) string {
	var ke *idem.KeyError
	if errors.As(err, &ke) {
		return "the Idempotency-Key header is invalid: " + ke.Reason
	}
	return "the Idempotency-Key header is invalid"
}

// input is the request as read once: body, fingerprint and digests.
type input struct {
	body []byte
	fp   idem.Fingerprint
	// fields is set when the body is a JSON object or a canonical form;
	// digests (a pooled buffer, held until release) then holds its
	// members' or fields' encoded idem.Digests, computed with the
	// fingerprint and turned into a string only when a claim is written.
	fields  bool
	digests *[]byte
	// form is set for a form body (whatever its canonical form): a
	// record claimed before form bodies were canonicalised has its raw
	// fingerprint (see legacyFingerprint).
	form  bool
	route string
}

// digestBufs holds encoded-digest buffers between requests. The digest
// list is bounded (idem.BodyHasher), so every buffer stays small.
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// release hands the digests' buffer back to its pool.
func (in *input) release() {
	if in.digests != nil {
		*in.digests = (*in.digests)[:0]
		digestBufs.Put(in.digests)
		in.digests = nil
	}
}

// prepare reads the body (bounded) into in and fingerprints the request
// made in scope. It answers 413 before anything is claimed.
func (m *Middleware) prepare(r *http.Request, scope string, in *input) *Problem {
	if r.ContentLength > m.cfg.MaxBody {
		return m.tooLarge()
	}
	if r.Body != nil && r.Body != http.NoBody {
		b, err := readBody(r.Body, r.ContentLength, m.cfg.MaxBody)
		_ = r.Body.Close()
		switch {
		case err == nil:
		case maxBytes(err):
			return m.tooLarge() // an http.MaxBytesReader around us said so
		case clientWentAway(r, err):
			return m.cancelled(r.Context(), err, "the client went away before its request body arrived in full; nothing was claimed and it may be retried with the same key")
		default:
			return problem(TypeBodyUnreadable, http.StatusBadRequest, "request body unreadable",
				"the request body could not be read; nothing was claimed and it may be retried with the same key")
		}
		if int64(len(b)) > m.cfg.MaxBody {
			return m.tooLarge()
		}
		in.body = b
	}
	kind := bodyKind(r.Header.Get("Content-Type"), in.body)
	dp := digestBufs.Get().(*[]byte)
	h := m.hasher
	if scope == "" {
		// The global scope keeps no field digests (see digestkey.go): no
		// member needs one of its own.
		h.MaxDigests = -1
	}
	in.route = m.cfg.Route(r)
	fp, d, err := h.AppendBody((*dp)[:0], r.Method, in.route, in.body, kind)
	*dp = d
	in.fp, in.digests = fp, dp
	in.form = kind == idem.BodyForm
	in.fields = kind == idem.BodyJSON && err == nil && firstByte(in.body) == '{' || in.form && len(d) > 0
	if err != nil {
		return problem(TypeBodyInvalidJSON, http.StatusBadRequest, "invalid JSON body",
			"the body is declared as JSON but is not valid JSON: "+jsonReason(err))
	}
	return nil
}

// bodyKind is how a body with Content-Type ct is canonicalised for its
// fingerprint: JSON and form bodies by their meaning, others (and an
// empty body) as bytes.
func bodyKind(ct string, body []byte) idem.BodyKind {
	switch {
	case len(body) == 0:
		return idem.BodyRaw
	case IsJSONContentType(ct):
		return idem.BodyJSON
	case IsFormContentType(ct):
		return idem.BodyForm
	}
	return idem.BodyRaw
}

// firstByte is b's first byte that is not JSON whitespace, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

func (m *Middleware) tooLarge() *Problem {
	return problem(TypeBodyTooLarge, http.StatusRequestEntityTooLarge, "request body too large",
		fmt.Sprintf("the request body exceeds %d bytes", m.cfg.MaxBody))
}

// maxBodyHint caps the buffer a declared Content-Length allocates before
// any byte arrives, so a client cannot reserve MaxBody per connection by
// declaring it and sending nothing.
const maxBodyHint = 64 << 10

// readBody reads at most limit+1 bytes of body: a caller seeing more than
// limit knows the body is too large. A known length (hint ≥ 0, already
// checked against limit) sizes the buffer at once, up to maxBodyHint.
func readBody(body io.Reader, hint, limit int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		size = min(hint+1, maxBodyHint) // room to see EOF without growing
	}
	b := make([]byte, 0, min(size, limit+1))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
		n, err := body.Read(b[len(b):min(int64(cap(b)), limit+1)])
		b = b[:len(b)+n]
		switch {
		case int64(len(b)) > limit, err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		}
	}
}

// maxBytes reports whether err is an http.MaxBytesReader's refusal. (Its
// own function, so that the variable errors.As needs is not allocated on
// every call.)
func maxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// clientWentAway reports whether reading r's body failed because the
// client went away (closed or half-closed its connection, reset it, or
// stopped sending) rather than because what it sent is malformed.
func clientWentAway(r *http.Request, err error) bool {
	if r.Context().Err() != nil {
		return true
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func jsonReason(err error) string {
	var je *idem.JSONError
	if errors.As(err, &je) {
		return fmt.Sprintf("%s at offset %d", je.Reason, je.Offset)
	}
	return "malformed"
}

// call is one protected request and everything kept for it, allocated
// once.
type call struct {
	m    *Middleware
	w    http.ResponseWriter
	r    *http.Request
	next http.Handler
	in   input
	// scope is Config.Scope's answer for r.
	scope  string
	intent idem.Intent
	ctl    control
	ctx    ctlContext
	rec    recorder
	// bodyOff is how much of in.body the handler has read (see callBody).
	bodyOff int
	ran     bool // the handler was called: rec holds its response
}

// BuildIntent implements idem.IntentBuilder: the journal written with the
// claim names the operation and holds the body's per-member digests.
func (c *call) BuildIntent() *idem.Intent {
	c.intent.Fields = c.m.intentFields(c.scope, &c.in)
	if c.m.cfg.Intent != nil {
		if c.intent.Fields == nil {
			c.intent.Fields = make(map[string]string) // the hook may add fields
		}
		c.m.cfg.Intent(c.r, c.in.body, &c.intent)
	}
	c.intent.Origin = Origin
	return &c.intent
}

// run executes the intent and answers the client.
func (c *call) run(req idem.Request) {
	m := c.m
	if m.cfg.RecoverPanics {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // sentinel value compared as net/http does
					panic(p)
				}
				m.cfg.Logger.Error("idemhttp: handler panicked; record marked unknown", "panic", fmt.Sprint(p))
				if !c.ran || !c.rec.passing {
					// What the handler wrote is dropped: the client gets the
					// truth, an error of unknown outcome.
					setWriteDeadline(c.w, m.cfg.WriteTimeout)
					WriteProblem(c.w, problem(TypeInternal, http.StatusInternalServerError, "internal error", ""))
				}
			}
		}()
	}
	res, err := m.engine.DoBytes(c.r.Context(), req, c.effect)
	if err != nil && c.in.form && !c.ran {
		if fp, ok := c.legacyFingerprint(err); ok {
			req.Fingerprint = fp
			res, err = m.engine.DoBytes(c.r.Context(), req, c.effect)
		}
	}
	if !c.ran {
		setWriteDeadline(c.w, m.cfg.WriteTimeout)
		m.answer(c.w, c.r, c.scope, res, err, &c.in)
		return
	}
	// The handler ran and its outcome is decided (recorded, released or
	// unknown): only now does its response go to the client.
	if c.rec.switched {
		m.cfg.Logger.Error("idemhttp: a protected handler switched protocols (101 or hijack); its outcome is unknown",
			"operation", req.Operation)
		setWriteDeadline(c.w, m.cfg.WriteTimeout)
		WriteProblem(c.w, problem(TypeInternal, http.StatusInternalServerError, "internal error",
			"the handler tried to switch protocols, which a request with an Idempotency-Key cannot do; its outcome is unknown"))
	} else {
		c.rec.send()
	}
	switch {
	case err == nil, errors.Is(err, idem.ErrReleased), errors.Is(err, idem.ErrUnknownOutcome), errors.Is(err, idem.ErrUnknown):
	case errors.Is(err, idem.ErrStoreLostClaim):
		m.cfg.Logger.Error("idemhttp: response sent, but the store lost this request's claim while it ran (a failover to a replica that never had it, or a store that forgot it); another attempt holds the key and may run the effect again", "err", err)
	default:
		m.cfg.Logger.Error("idemhttp: response sent but its outcome was not recorded; the record becomes unknown after its lease", "err", err)
	}
	if c.rec.gone || errors.Is(c.r.Context().Err(), context.Canceled) {
		c.clientGone(&req, err)
	}
}

// legacyFingerprint returns the fingerprint under which the record that
// err reports a mismatch with was claimed, when that is this very request
// hashed as bytes: form bodies were hashed so before they were
// canonicalised, and a retry of a request recorded then is no mismatch.
func (c *call) legacyFingerprint(err error) (idem.Fingerprint, bool) {
	var me *idem.MismatchError
	if !errors.As(err, &me) || me.Record == nil {
		return idem.Fingerprint{}, false
	}
	fp, _, _ := idem.FingerprintBody(c.r.Method, c.in.route, c.in.body, false)
	return fp, me.Record.Fingerprint == fp
}

// clientGone reports a client that went away while its request ran or
// before its response reached it. The outcome is the intent's, recorded
// or not as err says, whatever the client did.
func (c *call) clientGone(req *idem.Request, err error) {
	outcome := "recorded"
	switch {
	case errors.Is(err, idem.ErrReleased):
		outcome = "released"
	case errors.Is(err, idem.ErrUnknownOutcome):
		outcome = "unknown"
	case err != nil:
		outcome = "not recorded" // the error is logged above
	}
	c.m.cfg.Logger.Info("idemhttp: the client went away before its response reached it", "operation", req.Operation, "outcome", outcome)
	c.m.obs.Observe(c.r.Context(), idem.Event{Kind: idem.EventClientGone, Operation: req.Operation, Scope: req.Scope, Key: string(req.Key)})
}

// effect runs the handler on the request, its body restored, under the
// attempt's context.
func (c *call) effect(ctx context.Context, a *idem.Attempt) ([]byte, error) {
	if q := c.m.quota; q != nil {
		if qe := q.acquire(a.Scope); qe != nil {
			// Refused before the handler: the claim is released.
			c.m.obs.Observe(ctx, idem.Event{Kind: idem.EventScopeQuota, Quota: qe.Quota, Operation: c.intent.Operation, Scope: a.Scope, Key: string(a.Key)})
			return nil, idem.Release(qe)
		}
		defer q.done(a.Scope)
	}
	c.ran = true
	c.ctl.attempt = a
	c.rec.reset(c.w, c.m)
	c.bodyOff = 0
	c.ctx = ctlContext{Context: ctx, ctl: &c.ctl}
	r2 := c.r.WithContext(&c.ctx)
	r2.Body = (*callBody)(c)
	r2.ContentLength = int64(len(c.in.body))
	body := c.in.body
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	c.next.ServeHTTP(&c.rec, r2)
	return c.outcome()
}

var errMarkedUnknown = errors.New("idemhttp: handler marked the outcome unknown")

// outcome maps what the handler did to the engine's vocabulary.
func (c *call) outcome() ([]byte, error) {
	release, unknown := c.ctl.decision()
	switch {
	case unknown:
		return nil, idem.Unknown(errMarkedUnknown)
	case c.rec.switched:
		return nil, idem.Unknown(errSwitchProtocols)
	case release || slices.Contains(c.m.cfg.ReleaseStatuses, c.rec.finalStatus()):
		return nil, idem.Release(nil)
	}
	return c.rec.record(), nil
}

// callBody gives the handler the body read for the fingerprint, with what
// io.NopCloser(bytes.NewReader) offered, Read, WriteTo and Close, behaving
// as bytes.Reader does. It is the call itself, so it costs no allocation.
type callBody call

func (b *callBody) Read(p []byte) (int, error) {
	if b.bodyOff >= len(b.in.body) {
		return 0, io.EOF
	}
	n := copy(p, b.in.body[b.bodyOff:])
	b.bodyOff += n
	return n, nil
}

func (b *callBody) WriteTo(w io.Writer) (int64, error) {
	if b.bodyOff >= len(b.in.body) {
		return 0, nil
	}
	s := b.in.body[b.bodyOff:]
	m, err := w.Write(s)
	if m > len(s) {
		panic("idemhttp: body WriteTo: invalid Write count")
	}
	b.bodyOff += m
	if m != len(s) && err == nil {
		err = io.ErrShortWrite
	}
	return int64(m), err
}

func (b *callBody) Close() error { return nil }
