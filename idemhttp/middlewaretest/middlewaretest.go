// Package middlewaretest runs idemhttp's guarantees over any [idem.Store]:
// a store module calls [Run] from its tests to show that the middleware
// keeps them on that store (replay, mismatch with the fields named,
// in-flight answers, unknown outcomes, released keys, one effect under
// concurrent duplicates, nothing claimed for a refused body), as
// storetest shows the store's own contract. idemhttp runs it on memstore.
package middlewaretest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Run runs the suite, each case a parallel subtest on a fresh store from
// open, which must isolate it from every other (its own file, schema or
// key prefix) and close it when the test ends.
func Run(t *testing.T, open func(t *testing.T) idem.Store) {
	for _, c := range []struct {
		name string
		f    func(t *testing.T, open func(t *testing.T) idem.Store)
	}{
		{"Replay", replay},
		{"MismatchNamesFields", mismatchNamesFields},
		{"BodyLimitBeforeClaim", bodyLimitBeforeClaim},
		{"InFlightReject", inFlightReject},
		{"InFlightWaitReplays", inFlightWaitReplays},
		{"ConcurrentDuplicatesOneEffect", concurrentDuplicates},
		{"MarkUnknown", markUnknown},
		{"LeaseExpiredIsUnknown", leaseExpiredIsUnknown},
		{"ReleaseKey", releaseKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.f(t, open)
		})
	}
}

// env is one middleware over one store behind an httptest server.
type env struct {
	t     *testing.T
	store idem.Store
	srv   *httptest.Server
	calls atomic.Int64
}

func newEnv(t *testing.T, open func(t *testing.T) idem.Store, ecfg idem.Config, cfg idemhttp.Config, h http.HandlerFunc) *env {
	t.Helper()
	st := open(t)
	// The suite checks the middleware's answers on the store, not the
	// store's durability (New's check and idem doctor do): a test server
	// that keeps records in memory only (a Redis without persistence) runs
	// it too.
	ecfg.AllowVolatileStore = true
	eng, err := idem.New(st, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if cfg.Scope == nil {
		cfg.Scope = idemhttp.GlobalScope
	}
	mw, err := idemhttp.New(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st}
	e.srv = httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		h(w, r)
	})))
	t.Cleanup(e.srv.Close)
	return e
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, path, key, body string) reply {
	e.t.Helper()
	return send(e.t, method, e.srv.URL+path, key, body)
}

// send sends one request; key "" sends no Idempotency-Key, a body is JSON.
// It may run on any goroutine: it reports failures with t.Error.
func send(t *testing.T, method, url, key, body string) reply {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	if key != "" {
		req.Header.Set(idemhttp.HeaderName, key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func wantStatus(t *testing.T, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
}

func wantProblem(t *testing.T, r reply, status int, typ string) idemhttp.Problem {
	t.Helper()
	wantStatus(t, r, status)
	var p idemhttp.Problem
	if ct := r.header.Get("Content-Type"); ct != idemhttp.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %s (body %s)", ct, idemhttp.ProblemContentType, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Type != typ {
		t.Fatalf("problem type = %q, want %q", p.Type, typ)
	}
	return p
}

// created answers 201 with a body, a cookie and a Location.
func created(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/1")
	w.Header().Set("Set-Cookie", "session=secret")
	w.Header().Set("X-Internal", "not-allow-listed")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":1}`))
}

func (e *env) wantCalls(n int64) {
	e.t.Helper()
	if got := e.calls.Load(); got != n {
		e.t.Fatalf("handler ran %d times, want %d", got, n)
	}
}

func replay(t *testing.T, open func(t *testing.T) idem.Store) {
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, created)
	first := e.do("POST", "/orders", `"k1"`, `{"amount":5}`)
	wantStatus(t, first, http.StatusCreated)
	if first.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatal("first response marked as replayed")
	}
	// A bare token is the same key; a re-serialised body the same request.
	second := e.do("POST", "/orders", `k1`, "{ \"amount\" : 5 }")
	wantStatus(t, second, http.StatusCreated)
	e.wantCalls(1)
	if second.body != `{"id":1}` || second.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("replay = %q, Idempotent-Replayed %q", second.body, second.header.Get(idemhttp.ReplayedHeader))
	}
	if second.header.Get("Location") != "/orders/1" || second.header.Get("Content-Type") != "application/json" {
		t.Fatalf("allow-listed headers not replayed: %v", second.header)
	}
	if second.header.Get("Set-Cookie") != "" || second.header.Get("X-Internal") != "" {
		t.Fatalf("non-allow-listed headers replayed: %v", second.header)
	}
}

// The digests the store keeps with the claim name the changed fields; the
// values are never echoed. Fields are named in a principal's scope only
// (in the global scope the list would be an oracle on others' bodies).
func mismatchNamesFields(t *testing.T, open func(t *testing.T) idem.Store) {
	tenant := func(*http.Request) (string, error) { return "tenant-1", nil }
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: tenant}, created)
	wantStatus(t, e.do("POST", "/charges", `"m"`, `{"amount":5000,"currency":"EUR","to":"acct_1"}`), http.StatusCreated)
	r := e.do("POST", "/charges", `"m"`, `{"amount":5001,"currency":"EUR","memo":"x"}`)
	p := wantProblem(t, r, http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	if strings.Join(p.Fields, ",") != "amount,memo,to" {
		t.Fatalf("fields = %v, want [amount memo to]", p.Fields)
	}
	if strings.Contains(r.body, "5001") || strings.Contains(r.body, "acct_1") {
		t.Fatalf("mismatch echoes values: %s", r.body)
	}
	// Another route with the same key and body is a mismatch too.
	wantProblem(t, e.do("POST", "/refunds", `"m"`, `{"amount":5000,"currency":"EUR","to":"acct_1"}`),
		http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
	e.wantCalls(1)
}

func bodyLimitBeforeClaim(t *testing.T, open func(t *testing.T) idem.Store) {
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{MaxBody: 16}, created)
	wantProblem(t, e.do("POST", "/x", `"big"`, `{"a":"0123456789abcdef"}`), http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge)
	if _, err := e.store.Get(context.Background(), "", "big"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("a record exists after 413: %v", err)
	}
	wantProblem(t, e.do("POST", "/x", `"bad"`, `{"a":`), http.StatusBadRequest, idemhttp.TypeBodyInvalidJSON)
	if _, err := e.store.Get(context.Background(), "", "bad"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("a record exists after 400: %v", err)
	}
	e.wantCalls(0)
}

func inFlightReject(t *testing.T, open func(t *testing.T) idem.Store) {
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, open, idem.Config{RetryAfter: 2 * time.Second}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.WriteHeader(http.StatusAccepted)
	})
	done := make(chan reply)
	go func() { done <- send(t, "POST", e.srv.URL+"/x", `"f"`, `{}`) }()
	<-started
	r := e.do("POST", "/x", `"f"`, `{}`)
	p := wantProblem(t, r, http.StatusConflict, idemhttp.TypeInFlight)
	if r.header.Get("Retry-After") != "2" || p.RetryAfter != 2 {
		t.Errorf("Retry-After = %q / %d, want 2", r.header.Get("Retry-After"), p.RetryAfter)
	}
	// A different body while in flight is a mismatch at once, not 409.
	mm := e.do("POST", "/x", `"f"`, `{"a":1}`)
	close(release)
	wantStatus(t, <-done, http.StatusAccepted)
	wantProblem(t, mm, http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
}

func inFlightWaitReplays(t *testing.T, open func(t *testing.T) idem.Store) {
	started, release := make(chan struct{}), make(chan struct{})
	cfg := idemhttp.Config{Rules: []idemhttp.Rule{{Methods: []string{"POST"}, Requirement: idemhttp.Required,
		Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}}}
	e := newEnv(t, open, idem.Config{}, cfg, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = w.Write([]byte("done"))
	})
	first := make(chan reply)
	go func() { first <- send(t, "POST", e.srv.URL+"/x", `"w"`, `{}`) }()
	<-started
	second := make(chan reply)
	go func() { second <- send(t, "POST", e.srv.URL+"/x", `"w"`, `{}`) }()
	close(release)
	a, b := <-first, <-second
	if a.body != "done" || b.body != "done" || b.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("first %q, waiter %q replayed=%q", a.body, b.body, b.header.Get(idemhttp.ReplayedHeader))
	}
	e.wantCalls(1)
}

// Concurrent duplicates of one request run the handler once; every one
// gets its response (waiting for it) with the same body.
func concurrentDuplicates(t *testing.T, open func(t *testing.T) idem.Store) {
	cfg := idemhttp.Config{Rules: []idemhttp.Rule{{Methods: []string{"POST"}, Requirement: idemhttp.Required,
		Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}}}
	e := newEnv(t, open, idem.Config{}, cfg, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // let the duplicates arrive while it runs
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charge":"ch_1"}`))
	})
	const n = 16
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i] = send(t, "POST", e.srv.URL+"/charges", `"c"`, `{"amount":1}`) })
	}
	wg.Wait()
	e.wantCalls(1)
	for i, r := range replies {
		if r.status != http.StatusCreated || r.body != `{"charge":"ch_1"}` {
			t.Errorf("duplicate %d: %d %q, want 201 and the recorded body", i, r.status, r.body)
		}
	}
}

func markUnknown(t *testing.T, open func(t *testing.T) idem.Store) {
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
		if !idemhttp.MarkUnknown(r.Context()) {
			t.Error("MarkUnknown outside a protected request")
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	})
	wantStatus(t, e.do("POST", "/x", `"u"`, `{}`), http.StatusGatewayTimeout)
	r := e.do("POST", "/x", `"u"`, `{}`)
	p := wantProblem(t, r, http.StatusConflict, idemhttp.TypeOutcomeUnknown)
	// Waiting does not resolve an unknown outcome: no Retry-After, which
	// a client would poll by, and a Stripe-style client is told not to
	// retry.
	if ra := r.header.Get("Retry-After"); ra != "" || p.RetryAfter != 0 {
		t.Fatalf("unknown outcome with Retry-After %q (retry_after %d)", ra, p.RetryAfter)
	}
	if sr := r.header.Get("Stripe-Should-Retry"); sr != "false" {
		t.Fatalf("unknown outcome with Stripe-Should-Retry %q, want false", sr)
	}
	e.wantCalls(1)
}

func leaseExpiredIsUnknown(t *testing.T, open func(t *testing.T) idem.Store) {
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, created)
	// A crashed attempt: claimed, lease long gone, nothing recorded.
	fp, _, err := idem.FingerprintBody("POST", "/x", []byte(`{}`), true)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	if _, err := e.store.Claim(context.Background(), idem.ClaimParams{Key: "crashed", Fingerprint: fp,
		AttemptID: "a1", Now: past, LeaseUntil: past.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.do("POST", "/x", `"crashed"`, `{}`), http.StatusConflict, idemhttp.TypeOutcomeUnknown)
	if e.calls.Load() != 0 {
		t.Fatal("a crashed attempt was re-run")
	}
}

func releaseKey(t *testing.T, open func(t *testing.T) idem.Store) {
	e := newEnv(t, open, idem.Config{}, idemhttp.Config{ReleaseStatuses: []int{429}}, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/invalid":
			idemhttp.ReleaseKey(r.Context())
			w.WriteHeader(http.StatusBadRequest)
		case "/shed":
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	for _, path := range []string{"/invalid", "/shed"} {
		e.calls.Store(0)
		e.do("POST", path, `"r`+path+`"`, `{}`)
		e.do("POST", path, `"r`+path+`"`, `{}`)
		if e.calls.Load() != 2 {
			t.Fatalf("%s: handler ran %d times; a released key must run again", path, e.calls.Load())
		}
	}
}
