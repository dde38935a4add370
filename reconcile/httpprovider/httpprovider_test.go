package httpprovider_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/httpprovider"
)

func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /charges/{key}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		switch k := r.PathValue("key"); k {
		case "charge:v1:a/b":
			_, _ = w.Write([]byte(`{"key":"charge:v1:a/b","amount":1250,"currency":"eur","status":"applied","applied_at":"2025-03-01T12:00:00Z"}`))
		case "wrong":
			_, _ = w.Write([]byte(`{"key":"other","amount":1,"currency":"EUR","status":"applied","applied_at":"2025-03-01T12:00:00Z"}`))
		case "broken":
			_, _ = w.Write([]byte(`{"key":"broken","currency":"EUR"}`))
		case "busy":
			http.Error(w, "later", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("GET /lookup", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("k") != "a&b" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"key":"a&b","amount":5,"currency":"USD","status":"declined","applied_at":"2025-03-01T12:00:00Z"}`))
	})
	mux.HandleFunc("GET /settlements", func(w http.ResponseWriter, r *http.Request) {
		if _, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since")); err != nil || r.URL.Query().Get("acct") != "7" {
			http.Error(w, "bad since", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`[{"key":"x","scope":"shop","amount":1,"currency":"EUR","status":"applied","applied_at":"2025-03-01T12:00:00Z"}]`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestLookup(t *testing.T) {
	t.Parallel()
	srv := server(t)
	p, err := httpprovider.New(httpprovider.Config{URLTemplate: srv.URL + "/charges/{key}",
		Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := p.Lookup(ctx, "charge:v1:a/b") // the slash is escaped into one path segment
	if err != nil || a.Amount != 1250 || a.Currency != "EUR" || a.Status != reconcile.StatusApplied || len(a.Result) == 0 {
		t.Fatalf("Lookup = %+v, %v", a, err)
	}
	if _, err := p.Lookup(ctx, "absent"); !errors.Is(err, reconcile.ErrNotApplied) {
		t.Fatalf("404: %v", err)
	}
	for key, want := range map[string]string{"wrong": "answered for", "broken": "lacks", "busy": "503"} {
		if _, err := p.Lookup(ctx, key); err == nil || errors.Is(err, reconcile.ErrNotApplied) || !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup(%s) = %v, want an error mentioning %q", key, err, want)
		}
	}
	for _, err := range p.AppliedSince(ctx, time.Time{}) {
		if !errors.Is(err, reconcile.ErrListUnsupported) {
			t.Fatalf("listing without ListURL: %v", err)
		}
	}
}

func TestQueryTemplateAndListing(t *testing.T) {
	t.Parallel()
	srv := server(t)
	p, err := httpprovider.New(httpprovider.Config{URLTemplate: srv.URL + "/lookup?k={key}", ListURL: srv.URL + "/settlements?acct=7"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := p.Lookup(ctx, "a&b"); err != nil || a.Status != reconcile.StatusFailed {
		t.Fatalf("query template: %+v, %v", a, err)
	}
	n := 0
	for a, err := range p.AppliedSince(ctx, time.Now()) {
		if err != nil || a.Key != "x" || a.Scope != "shop" {
			t.Fatalf("listing: %+v, %v", a, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("listing yielded %d entries", n)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"", "http://psp.example/charges", "ftp://psp.example/{key}", "/charges/{key}"} {
		if _, err := httpprovider.New(httpprovider.Config{URLTemplate: tmpl}); err == nil {
			t.Errorf("template %q accepted", tmpl)
		}
	}
}
