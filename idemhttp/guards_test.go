package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// forbiddenHeaders are set by handlers (or planted in records) and must
// never be recorded or replayed: credentials, cookies and hop-by-hop.
var forbiddenHeaders = []string{"Set-Cookie", "Authorization", "Connection", "Keep-Alive", "Proxy-Authenticate"}

// serveDirect runs one request through the env's middleware in process, so
// the headers it writes are seen as written (no transport in between that
// could consume Connection or Keep-Alive).
func serveDirect(t *testing.T, e *env, method, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set(idemhttp.HeaderName, key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	return rec
}

// wantNoForbidden fails if h holds any forbidden header, under any
// spelling of its name.
func wantNoForbidden(t *testing.T, what string, h http.Header) {
	t.Helper()
	for k, vs := range h {
		for _, f := range forbiddenHeaders {
			if http.CanonicalHeaderKey(k) == f {
				t.Errorf("%s holds %s: %q", what, k, vs)
			}
		}
	}
}

// The recorder stores only allow-listed headers: a handler's Set-Cookie,
// Authorization and hop-by-hop headers are not in the record, and so not
// in the replay.
func TestForbiddenHeadersNotRecorded(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{RecordHeaders: []string{"X-Request-Id"}},
			func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h.Set("Location", "/orders/1")
				h.Set("X-Request-Id", "req-1")
				h.Set("Set-Cookie", "session=secret")
				h.Set("Authorization", "Bearer secret")
				h.Set("Connection", "X-Trace")
				h.Set("Keep-Alive", "timeout=5")
				h.Set("Proxy-Authenticate", "Basic")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"id":1}`))
			})
		first := serveDirect(t, e, "POST", "/orders", `"h"`, `{}`)
		if first.Code != http.StatusCreated || first.Header().Get("Set-Cookie") == "" || first.Header().Get("Authorization") == "" {
			t.Fatalf("first response: %d %v; want 201 with the handler's headers", first.Code, first.Header())
		}
		rec, err := e.store.Get(context.Background(), "", "h")
		if err != nil {
			t.Fatal(err)
		}
		rr, err := idemhttp.DecodeResponse(rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		if rr.Status != http.StatusCreated || rr.Header.Get("Location") != "/orders/1" || rr.Header.Get("X-Request-Id") != "req-1" {
			t.Fatalf("record = %+v; want 201 with Location and X-Request-Id", rr)
		}
		wantNoForbidden(t, "the record", rr.Header)

		second := serveDirect(t, e, "POST", "/orders", `"h"`, `{}`)
		if second.Code != http.StatusCreated || second.Header().Get(idemhttp.ReplayedHeader) != "true" ||
			second.Header().Get("Location") != "/orders/1" || second.Header().Get("X-Request-Id") != "req-1" {
			t.Fatalf("replay: %d %v", second.Code, second.Header())
		}
		wantNoForbidden(t, "the replay", second.Header())
		// Over the wire too.
		wantNoForbidden(t, "the replay over HTTP", e.do("POST", "/orders", `"h"`, `{}`).header)
		if e.calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", e.calls.Load())
		}
	})
}

// The replay filters the record it reads: a record that holds forbidden
// headers (written by hand, by an older version or by another tool) does
// not replay them.
func TestForbiddenHeadersNotReplayed(t *testing.T) {
	planted := http.Header{
		"Location":           {"/charges/7"},
		"Set-Cookie":         {"s=1"},
		"set-cookie":         {"s=2"},
		"Authorization":      {"Bearer secret"},
		"authorization":      {"Basic c2VjcmV0"},
		"Connection":         {"X-Trace"},
		"Keep-Alive":         {"timeout=5"},
		"Proxy-Authenticate": {"Basic"},
	}
	v2, err := (&idemhttp.RecordedResponse{Status: http.StatusAccepted, Header: planted, Body: []byte(`{"id":7}`)}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	records := map[string][]byte{"binary": v2}
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		for name, result := range records {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, open, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}, idemhttp.Config{},
					func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
				serveDirect(t, e, "POST", "/c", `"planted"`, `{}`)
				if _, err := e.eng.Resolve(context.Background(), "", "planted",
					idem.Resolution{As: idem.StateSucceeded, Result: result, Force: true}); err != nil {
					t.Fatal(err)
				}
				r := serveDirect(t, e, "POST", "/c", `"planted"`, `{}`)
				if r.Code != http.StatusAccepted || r.Body.String() != `{"id":7}` ||
					r.Header().Get("Location") != "/charges/7" || r.Header().Get(idemhttp.ReplayedHeader) != "true" {
					t.Fatalf("replay: %d %q %v", r.Code, r.Body.String(), r.Header())
				}
				wantNoForbidden(t, "the replay", r.Header())
				if e.calls.Load() != 1 {
					t.Fatalf("handler ran %d times, want 1", e.calls.Load())
				}
			})
		}
	})
}

// RecordHeaders cannot ask for credentials, cookies or hop-by-hop headers:
// New refuses them, naming the header.
func TestRecordHeadersRefusesForbidden(t *testing.T) {
	t.Parallel()
	eng, err := idem.New(&brokenStore{}, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{
		"Authorization", "authorization", "Proxy-Authorization", "Set-Cookie", "set-cookie2",
		"Connection", "connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
	} {
		_, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, RecordHeaders: []string{"X-Request-Id", h}})
		if err == nil {
			t.Errorf("New accepted %q in RecordHeaders", h)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "RecordHeaders") || !strings.Contains(msg, `"`+h+`"`) || !strings.Contains(msg, "never recorded") {
			t.Errorf("RecordHeaders %q: error %q does not say which header is refused and why", h, msg)
		}
	}
	if _, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, RecordHeaders: []string{"X-Request-Id"}}); err != nil {
		t.Fatalf("New refused X-Request-Id: %v", err)
	}
}

// A chunked body (no Content-Length) is bounded after it is read: one
// byte over MaxBody is refused with 413 before anything is claimed, and
// the handler never sees a truncated body. One of exactly MaxBody passes
// whole.
func TestChunkedBodyLimit(t *testing.T) {
	const maxBody = 64
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var (
			mu  sync.Mutex
			got []string
		)
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{MaxBody: maxBody}, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		})
		chunked := func(key, body string) reply {
			t.Helper()
			req, err := http.NewRequest("POST", e.srv.URL+"/upload", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1 // sent chunked: the server sees no length
			req.Header.Set(idemhttp.HeaderName, key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
		}
		// A JSON string of n bytes.
		body := func(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

		for _, n := range []int{maxBody + 1, 4 * maxBody} {
			wantProblem(t, chunked(`"big"`, body(n)), http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge)
			if e.calls.Load() != 0 {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("handler ran on a %d-byte chunked body over MaxBody %d (it got %d bytes)", n, maxBody, len(got[0]))
			}
			if _, err := e.store.Get(context.Background(), "", "big"); !errors.Is(err, idem.ErrNotFound) {
				t.Fatalf("a record exists after 413: %v", err)
			}
		}
		// Nothing was claimed: the key is free, and a body of exactly
		// MaxBody reaches the handler whole.
		wantStatus(t, chunked(`"big"`, body(maxBody)), http.StatusCreated)
		mu.Lock()
		defer mu.Unlock()
		if e.calls.Load() != 1 || len(got) != 1 || got[0] != body(maxBody) {
			t.Fatalf("handler ran %d times with %q, want once with the whole body", e.calls.Load(), got)
		}
	})
}

// The fingerprint covers the method and the route whatever the body: the
// same key with the same body but another method, or (for a non-JSON
// body) another route, is a key mismatch and the handler runs once.
func TestKeyReuseAcrossMethodOrRoute(t *testing.T) {
	const text = "amount=5&currency=EUR"
	cases := []struct {
		name          string
		first, second [2]string // method, path
		body, ct      string
	}{
		{"method, JSON body", [2]string{"POST", "/orders/1"}, [2]string{"PUT", "/orders/1"}, `{"amount":5}`, "application/json"},
		{"method, JSON array body", [2]string{"POST", "/orders/1"}, [2]string{"PUT", "/orders/1"}, `[1,2]`, "application/json"},
		{"method, text body", [2]string{"POST", "/orders/1"}, [2]string{"PUT", "/orders/1"}, text, "text/plain"},
		{"method, form body", [2]string{"PUT", "/orders/1"}, [2]string{"POST", "/orders/1"}, text, "application/x-www-form-urlencoded"},
		{"route, text body", [2]string{"POST", "/orders/1"}, [2]string{"POST", "/orders/2"}, text, "text/plain"},
		{"route, query, text body", [2]string{"POST", "/orders/1?a=1"}, [2]string{"POST", "/orders/1?a=2"}, text, "text/plain"},
		{"route, JSON body", [2]string{"POST", "/orders/1"}, [2]string{"POST", "/orders/2"}, `{"amount":5}`, "application/json"},
	}
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var n int64
				cfg := idemhttp.Config{Rules: []idemhttp.Rule{{
					Methods: []string{"POST", "PUT"}, Pattern: "/orders/*", Requirement: idemhttp.Required, Operation: "upsert order",
				}}}
				e := newEnv(t, open, idem.Config{}, cfg, created(&n))
				wantStatus(t, e.do(c.first[0], c.first[1], `"k"`, c.body, "Content-Type", c.ct), http.StatusCreated)
				// The same request again is a replay, so what differs below
				// is what makes the mismatch.
				again := e.do(c.first[0], c.first[1], `"k"`, c.body, "Content-Type", c.ct)
				if again.status != http.StatusCreated || again.header.Get(idemhttp.ReplayedHeader) != "true" {
					t.Fatalf("same request again: %d, replayed %q", again.status, again.header.Get(idemhttp.ReplayedHeader))
				}
				wantProblem(t, e.do(c.second[0], c.second[1], `"k"`, c.body, "Content-Type", c.ct),
					http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
				if e.calls.Load() != 1 {
					t.Fatalf("handler ran %d times, want 1", e.calls.Load())
				}
			})
		}
	})
}
