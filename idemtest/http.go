package idemtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/jsonmembers"
	"github.com/idemkit/idem/memstore"
)

// Case describes the request [HTTP] sends and how effects are counted.
type Case struct {
	// Method is the request method. Defaults to POST.
	Method string
	// Path is the request target (path and query). Defaults to "/".
	Path string
	// Header holds extra request headers (credentials, a tenant). The
	// Idempotency-Key header is set by idemtest. A JSON Body gets
	// Content-Type application/json unless Header sets one.
	Header http.Header
	// Body is the request body. It must make the handler succeed (2xx).
	Body string
	// Changed is another body for the divergence check. Defaults to Body
	// with a member "idem_changed" added when Body is a JSON object, and
	// to Body with " (changed)" appended otherwise.
	Changed string
	// Effects returns how many effects the handler has made so far (rows
	// written, calls to a fake provider). Without it only answers are
	// compared, and a handler that repeats its effect behind identical
	// answers is not caught. Defaults to none.
	Effects func() int
	// Concurrency is how many identical requests the concurrency check
	// sends at once. Defaults to [DefaultConcurrency].
	Concurrency int
	// Checks lists the checks to run. Defaults to [AllChecks] (a plain
	// handler gets only those that can be seen from outside).
	Checks []Check
}

// Built is a handler idemtest can rebuild over an engine of its own: over a
// store that crashes or loses answers, on a fake clock, with an observer.
// Build must wire the engine it is given into the handler it returns, for
// example:
//
//	func(e *idem.Engine) (http.Handler, error) {
//		mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.GlobalScope})
//		if err != nil {
//			return nil, err
//		}
//		return mw.Handler(app), nil
//	}
//
// A Built is itself an http.Handler, over an engine built from Store and
// Config the first time it serves.
type Built struct {
	// Build returns the handler over e.
	Build func(e *idem.Engine) (http.Handler, error)
	// Store returns a fresh store; idemtest closes it. Defaults to
	// memstore.New.
	Store func() idem.Store
	// Config is the engine configuration (TTL, lease, in-flight policy…);
	// idemtest replaces Clock and adds its observer for the checks that
	// need them. Defaults to the zero Config.
	Config idem.Config

	once sync.Once
	h    http.Handler
	err  error
}

// ServeHTTP serves r with the handler built over a default engine; it
// answers 500 if Build fails.
func (b *Built) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.once.Do(func() {
		st, _ := b.store()
		var e *idem.Engine
		if e, b.err = idem.New(st, b.Config); b.err == nil {
			b.h, b.err = b.Build(e)
		}
	})
	if b.err != nil {
		http.Error(w, "idemtest: building the handler: "+b.err.Error(), http.StatusInternalServerError)
		return
	}
	b.h.ServeHTTP(w, r)
}

func (b *Built) store() (idem.Store, func()) {
	var st idem.Store
	if b.Store != nil {
		st = b.Store()
	} else {
		st = memstore.New()
	}
	return st, func() { _ = st.Close() }
}

// HTTP runs the checks against h with requests described by c. A *[Built]
// handler gets every check; any other handler only replay, divergence and
// concurrency.
func HTTP(t testing.TB, h http.Handler, c Case) {
	t.Helper()
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if c.Path == "" {
		c.Path = "/"
	}
	if c.Changed == "" {
		c.Changed = jsonmembers.Changed(c.Body)
	}
	n := c.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	tg := &httpTarget{h: h, c: c}
	if b, ok := h.(*Built); ok {
		tg.built = b
	}
	r := &runner{t: t, tg: tg, n: n, checks: checksOf(c.Checks)}
	r.run()
}

// httpTarget drives an http.Handler.
type httpTarget struct {
	h     http.Handler
	c     Case
	built *Built
}

func (h *httpTarget) body(v variant) string {
	switch v {
	case changed:
		return h.c.Changed
	case reordered:
		b, _ := jsonmembers.Reordered(h.c.Body)
		return b
	}
	return h.c.Body
}

func (h *httpTarget) send(key string, v variant) answer {
	body := h.body(v)
	req := httptest.NewRequest(h.c.Method, h.c.Path, strings.NewReader(body))
	for k, vs := range h.c.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("Content-Type") == "" && json.Valid([]byte(body)) {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(idemhttp.HeaderName, key)
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	return &httpAnswer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func (h *httpTarget) describe(key string, v variant) string {
	return fmt.Sprintf("%s %s with %s: %q and body %s", h.c.Method, h.c.Path, idemhttp.HeaderName, key, clip([]byte(h.body(v))))
}

func (h *httpTarget) effects() (int, bool) {
	if h.c.Effects == nil {
		return 0, false
	}
	return h.c.Effects(), true
}

func (h *httpTarget) canReorder() bool {
	_, ok := jsonmembers.Reordered(h.c.Body)
	return ok
}

func (h *httpTarget) deep() bool { return h.built != nil }

func (h *httpTarget) rebuild(st idem.Store, cfg idem.Config) (target, func(), error) {
	e, err := idem.New(st, cfg)
	if err != nil {
		return nil, nil, err
	}
	hh, err := h.built.Build(e)
	if err != nil {
		_ = e.Close()
		return nil, nil, err
	}
	return &httpTarget{h: hh, c: h.c, built: h.built}, func() { _ = e.Close() }, nil
}

func (h *httpTarget) baseConfig() idem.Config { return h.built.Config }

func (h *httpTarget) newStore() (idem.Store, func()) { return h.built.store() }

func (h *httpTarget) fix(c Check) string {
	switch c {
	case Replay:
		return "run the effect through idem (idemhttp.New(engine, cfg).Handler(app)) and take the key from the request's Idempotency-Key header, never from a value made per request (a uuid, the time)"
	case Divergence:
		return "fingerprint the request before claiming the key: method, route and canonical JSON body (idemhttp does this; with the engine directly, set Request.Fingerprint from idem.FingerprintBody)"
	case Concurrency:
		return "claim the key atomically before the effect (idem.Store.Claim through the engine); looking the key up and writing it after the effect (check-then-act) lets concurrent duplicates all pass the check"
	case Crash:
		return "let the middleware record what a crash leaves: do not release the key (idemhttp.ReleaseKey, Config.ReleaseStatuses) when the effect may have run, and do not declare a Policy Redrivable unless the provider deduplicates by the forwarded key"
	case LostAnswers:
		return "do not turn a store error into a re-run: keep the engine's StoreRetries above 0 and pass store errors through (503)"
	case Retention:
		return "set idem.Config.TTL to cover the longest retry window (Config.Cover), counted from the recorded outcome"
	case Observability:
		return "Build must wire the engine it is given into the handler (not one of its own), and keep Config.Observer"
	}
	return ""
}

// httpAnswer is one response.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a *httpAnswer) ok() bool       { return a.status >= 200 && a.status < 300 }
func (a *httpAnswer) mismatch() bool { return a.status == http.StatusUnprocessableEntity }
func (a *httpAnswer) inFlight() bool {
	return a.status == http.StatusConflict && a.header.Get("Retry-After") != "" && !bytes.Contains(a.body, []byte("outcome-unknown"))
}
func (a *httpAnswer) unknown() bool {
	return a.status == http.StatusConflict && !bytes.Contains(a.body, []byte("in-flight"))
}

func (a *httpAnswer) same(o answer) bool {
	b, ok := o.(*httpAnswer)
	if !ok || a.status != b.status || !bytes.Equal(a.body, b.body) {
		return false
	}
	for _, h := range idemhttp.DefaultRecordHeaders {
		if h == "Retry-After" {
			continue
		}
		if strings.Join(a.header.Values(h), ",") != strings.Join(b.header.Values(h), ",") {
			return false
		}
	}
	return true
}

func (a *httpAnswer) String() string {
	s := fmt.Sprintf("HTTP %d, body %s", a.status, clip(a.body))
	for _, h := range idemhttp.DefaultRecordHeaders {
		if v := a.header.Get(h); v != "" && h != "Content-Type" {
			s += fmt.Sprintf(", %s: %s", h, v)
		}
	}
	if v := a.header.Get(idemhttp.ReplayedHeader); v != "" {
		s += ", " + idemhttp.ReplayedHeader + ": " + v
	}
	return s
}

// clip quotes b for a message, shortened past 200 bytes.
func clip(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}
