package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

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
