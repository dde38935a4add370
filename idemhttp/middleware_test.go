package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// created answers 201 with a body naming the call, a cookie and a Location.
func created(n *int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		*n++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("X-Internal", "not-allow-listed")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}
}

func TestReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, created(&n))
		first := e.do("POST", "/orders", `"k1"`, `{"amount":5}`)
		wantStatus(t, first, http.StatusCreated)
		if first.header.Get(idemhttp.ReplayedHeader) != "" {
			t.Fatal("first response marked as replayed")
		}
		// A bare token is the same key; a re-serialised body the same request.
		second := e.do("POST", "/orders", `k1`, "{ \"amount\" : 5 }")
		wantStatus(t, second, http.StatusCreated)
		if e.calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", e.calls.Load())
		}
		if second.body != `{"id":1}` || second.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("replay = %q, Idempotent-Replayed %q", second.body, second.header.Get(idemhttp.ReplayedHeader))
		}
		if second.header.Get("Location") != "/orders/1" || second.header.Get("Content-Type") != "application/json" {
			t.Fatalf("allow-listed headers not replayed: %v", second.header)
		}
		if second.header.Get("Set-Cookie") != "" || second.header.Get("X-Internal") != "" {
			t.Fatalf("non-allow-listed headers replayed: %v", second.header)
		}
	})
}

func TestInvalidKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, created(&n))
		for _, k := range []string{`""`, `"unterminated`, `a b`, `"` + strings.Repeat("x", 256) + `"`, `"a";p=1`} {
			r := e.do("POST", "/orders", k, `{}`)
			wantProblem(t, r, http.StatusBadRequest, idemhttp.TypeKeyInvalid)
		}
		if e.calls.Load() != 0 {
			t.Fatalf("handler ran for an invalid key")
		}
	})
}

func TestRequirements(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		cfg := idemhttp.Config{Rules: []idemhttp.Rule{
			{Pattern: "/health/", Requirement: idemhttp.Exempt},
			{Methods: []string{"POST"}, Pattern: "/charges", Requirement: idemhttp.Required},
			{Methods: []string{"POST"}, Pattern: "/notes/*", Requirement: idemhttp.Optional},
		}}
		e := newEnv(t, open, idem.Config{}, cfg, created(&n))
		wantProblem(t, e.do("POST", "/charges", "", `{}`), http.StatusBadRequest, idemhttp.TypeKeyMissing)
		wantStatus(t, e.do("POST", "/charges", `"c"`, `{}`), http.StatusCreated)
		// Optional without a key runs every time; exempt ignores even a bad key.
		wantStatus(t, e.do("POST", "/notes/1", "", `{}`), http.StatusCreated)
		wantStatus(t, e.do("POST", "/notes/1", "", `{}`), http.StatusCreated)
		wantStatus(t, e.do("POST", "/health/x", `"bad key`, `{}`), http.StatusCreated)
		// GET is never subject, and unmatched routes are exempt.
		wantStatus(t, e.do("GET", "/charges", "", ""), http.StatusCreated)
		wantStatus(t, e.do("POST", "/other", `"bad key`, `{}`), http.StatusCreated)
		if got := e.calls.Load(); got != 6 {
			t.Fatalf("handler ran %d times, want 6", got)
		}
	})
}

func TestMismatchNamesFields(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, created(&n))
		wantStatus(t, e.do("POST", "/charges", `"m"`, `{"amount":5000,"currency":"EUR","to":"acct_1"}`, "X-User-Id", "u1"), http.StatusCreated)
		r := e.do("POST", "/charges", `"m"`, `{"amount":5001,"currency":"EUR","memo":"x"}`, "X-User-Id", "u1")
		p := wantProblem(t, r, http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if strings.Join(p.Fields, ",") != "amount,memo,to" {
			t.Fatalf("fields = %v, want [amount memo to]", p.Fields)
		}
		if strings.Contains(r.body, "5001") || strings.Contains(r.body, "acct_1") {
			t.Fatalf("mismatch echoes values: %s", r.body)
		}
		// Another route with the same key and body is a mismatch too.
		wantProblem(t, e.do("POST", "/refunds", `"m"`, `{"amount":5000,"currency":"EUR","to":"acct_1"}`, "X-User-Id", "u1"),
			http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if e.calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", e.calls.Load())
		}
	})
}

func TestBodyLimitBeforeClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{MaxBody: 16}, created(&n))
		wantProblem(t, e.do("POST", "/x", `"big"`, `{"a":"0123456789abcdef"}`), http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge)
		if _, err := e.store.Get(context.Background(), "", "big"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("a record exists after 413: %v", err)
		}
		wantProblem(t, e.do("POST", "/x", `"bad"`, `{"a":`), http.StatusBadRequest, idemhttp.TypeBodyInvalidJSON)
		if e.calls.Load() != 0 {
			t.Fatal("handler ran")
		}
	})
}

func TestBodyRestoredForHandler(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 64)
			k, _ := r.Body.Read(b)
			_, _ = w.Write(b[:k])
		})
		r := e.do("POST", "/echo", `"e"`, `{"hello":"world"}`)
		if r.body != `{"hello":"world"}` {
			t.Fatalf("handler saw body %q", r.body)
		}
	})
}

func TestInFlightReject(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		started, release := make(chan struct{}), make(chan struct{})
		e := newEnv(t, open, idem.Config{RetryAfter: 2 * time.Second}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			w.WriteHeader(http.StatusAccepted)
		})
		done := make(chan reply)
		go func() { done <- doURL(t, "POST", e.srv.URL+"/x", `"f"`, `{}`) }()
		<-started
		r := e.do("POST", "/x", `"f"`, `{}`)
		p := wantProblem(t, r, http.StatusConflict, idemhttp.TypeInFlight)
		if r.header.Get("Retry-After") != "2" || p.RetryAfter != 2 {
			t.Fatalf("Retry-After = %q / %d, want 2", r.header.Get("Retry-After"), p.RetryAfter)
		}
		// A different body while in flight is a mismatch at once, not 409.
		wantProblem(t, e.do("POST", "/x", `"f"`, `{"a":1}`), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		close(release)
		wantStatus(t, <-done, http.StatusAccepted)
	})
}

func TestInFlightWaitReplays(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		started, release := make(chan struct{}), make(chan struct{})
		cfg := idemhttp.Config{Rules: []idemhttp.Rule{{Methods: []string{"POST"}, Requirement: idemhttp.Required,
			Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}}}
		e := newEnv(t, open, idem.Config{}, cfg, func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-release
			_, _ = w.Write([]byte("done"))
		})
		first := make(chan reply)
		go func() { first <- doURL(t, "POST", e.srv.URL+"/x", `"w"`, `{}`) }()
		<-started
		second := make(chan reply)
		go func() { second <- doURL(t, "POST", e.srv.URL+"/x", `"w"`, `{}`) }()
		close(release)
		a, b := <-first, <-second
		if a.body != "done" || b.body != "done" || b.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("first %q, waiter %q replayed=%q", a.body, b.body, b.header.Get(idemhttp.ReplayedHeader))
		}
		if e.calls.Load() != 1 {
			t.Fatalf("handler ran %d times", e.calls.Load())
		}
	})
}

func TestMarkUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
			if !idemhttp.MarkUnknown(r.Context()) {
				t.Error("MarkUnknown outside a protected request")
			}
			w.WriteHeader(http.StatusGatewayTimeout)
		})
		wantStatus(t, e.do("POST", "/x", `"u"`, `{}`), http.StatusGatewayTimeout)
		r := e.do("POST", "/x", `"u"`, `{}`)
		wantProblem(t, r, http.StatusConflict, idemhttp.TypeOutcomeUnknown)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("unknown outcome without Retry-After")
		}
		if e.calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", e.calls.Load())
		}
	})
}

func TestLeaseExpiredIsUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, created(&n))
		// A crashed attempt: claimed, lease long gone, nothing recorded.
		fp, err := idem.FingerprintRequest("POST", "/x", []byte(`{}`), true)
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
	})
}

func TestReleaseKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
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
	})
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, func(t *testing.T) idem.Store { return &brokenStore{Store: open(t)} }, idem.Config{StoreRetries: -0},
			idemhttp.Config{}, created(&n))
		r := e.do("POST", "/x", `"s"`, `{}`)
		wantProblem(t, r, http.StatusServiceUnavailable, idemhttp.TypeStoreUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		if e.calls.Load() != 0 {
			t.Fatal("handler ran without protection")
		}
	})
}

// TestInvalidScope: a Scope function that hands over a value no store can
// keep (here a client's header, as is) gets 400 scope-invalid before
// anything is claimed or run — not a 500 or a store error.
func TestInvalidScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		ran := 0
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: func(r *http.Request) (string, error) {
			return r.Header.Get("X-Tenant"), nil
		}}, func(w http.ResponseWriter, r *http.Request) {
			ran++
			_, _ = w.Write([]byte("ok"))
		})
		for _, tenant := range []string{strings.Repeat("t", 256), "tenant\xff"} {
			p := wantProblem(t, e.do("POST", "/x", `"k"`, `{}`, "X-Tenant", tenant), http.StatusBadRequest, idemhttp.TypeScopeInvalid)
			if p.Detail == "" {
				t.Fatal("scope-invalid without a reason")
			}
		}
		if ran != 0 {
			t.Fatalf("handler ran %d times for invalid scopes", ran)
		}
		if r := e.do("POST", "/x", `"k"`, `{}`, "X-Tenant", "tenant-42"); r.status != http.StatusOK || ran != 1 {
			t.Fatalf("valid scope: status %d, ran %d", r.status, ran)
		}
		recs, err := e.store.List(context.Background(), idem.ListFilter{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("records: %d (%v), want only the valid scope's", len(recs), err)
		}
	})
}

type brokenStore struct{ idem.Store }

func (b *brokenStore) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	return idem.ClaimResult{}, errors.New("connection refused")
}

func TestScopes(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.HeaderScope("X-User")}, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("for " + r.Header.Get("X-User")))
		})
		a := e.do("POST", "/x", `"same"`, `{}`, "X-User", "alice")
		b := e.do("POST", "/x", `"same"`, `{}`, "X-User", "bob")
		if a.body != "for alice" || b.body != "for bob" || b.header.Get(idemhttp.ReplayedHeader) != "" {
			t.Fatalf("alice got %q, bob got %q (replayed %q)", a.body, b.body, b.header.Get(idemhttp.ReplayedHeader))
		}
		wantProblem(t, e.do("POST", "/x", `"same"`, `{}`), http.StatusUnauthorized, idemhttp.TypeScopeMissing)
		// The scope is stored hashed.
		recs, err := e.store.List(context.Background(), idem.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if strings.Contains(rec.Scope, "alice") || strings.Contains(rec.Scope, "bob") {
				t.Fatalf("scope stored in clear: %q", rec.Scope)
			}
		}
	})
}

func TestScopeRequired(t *testing.T) {
	t.Parallel()
	eng, err := idem.New(&brokenStore{}, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemhttp.New(eng, idemhttp.Config{}); err == nil || !strings.Contains(err.Error(), "GlobalScope") {
		t.Fatalf("New without Scope: %v; want an error pointing at GlobalScope", err)
	}
	if _, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, RecordHeaders: []string{"set-cookie"}}); err == nil {
		t.Fatal("New accepted Set-Cookie in RecordHeaders")
	}
}
