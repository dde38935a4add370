package idemhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// storeCase opens a fresh, isolated store of one backend.
type storeCase struct {
	name string
	open func(t *testing.T) idem.Store
}

// forEachStore runs f against every backend the tests can reach.
func forEachStore(t *testing.T, f func(t *testing.T, open func(t *testing.T) idem.Store)) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			f(t, sc.open)
		})
	}
}

// env is one middleware over one store behind an httptest server.
type env struct {
	t     *testing.T
	store idem.Store
	eng   *idem.Engine
	srv   *httptest.Server
	calls atomic.Int64
}

func newEnv(t *testing.T, open func(t *testing.T) idem.Store, ecfg idem.Config, cfg idemhttp.Config, h http.HandlerFunc) *env {
	t.Helper()
	st := open(t)
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
	e := &env{t: t, store: st, eng: eng}
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

func (r reply) problem(t *testing.T) idemhttp.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != idemhttp.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %s (status %d, body %s)", ct, idemhttp.ProblemContentType, r.status, r.body)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Status != r.status {
		t.Fatalf("problem status %d != response status %d", p.Status, r.status)
	}
	return p
}

func (e *env) do(method, path, key, body string, hdr ...string) reply {
	e.t.Helper()
	return doURL(e.t, method, e.srv.URL+path, key, body, hdr...)
}

// doURL sends one request. key "" sends no header; hdr holds name, value
// pairs.
func doURL(t testing.TB, method, url, key, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(idemhttp.HeaderName, key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
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
	p := r.problem(t)
	if p.Type != typ {
		t.Fatalf("problem type = %q, want %q", p.Type, typ)
	}
	return p
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// wantCalls fails unless the handler ran n times.
func (e *env) wantCalls(n int64) {
	e.t.Helper()
	if got := e.calls.Load(); got != n {
		e.t.Fatalf("the handler ran %d times, want %d", got, n)
	}
}
