package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/webhook"
)

func newServer(t *testing.T, ex webhook.Extractor, h webhook.Handler) *httptest.Server {
	t.Helper()
	st := memstore.New()
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := webhook.New(webhook.Config{Engine: e, EventID: ex, MaxBody: 1024}, h)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	t.Cleanup(func() { srv.Close(); e.Close(); st.Close() })
	return srv
}

func post(t *testing.T, srv *httptest.Server, id, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	if id != "" {
		req.Header.Set("X-Event-Id", id)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Fifty concurrent deliveries of one event: one effect, fifty 2xx.
func TestConcurrentDeliveriesOneEffect(t *testing.T) {
	t.Parallel()
	var effects atomic.Int32
	gate := make(chan struct{})
	srv := newServer(t, webhook.Header("X-Event-Id"), func(context.Context, *webhook.Event) error {
		<-gate // hold the first so the others arrive while it runs
		effects.Add(1)
		return nil
	})
	const n = 50
	var wg sync.WaitGroup
	var ok, replayed atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := post(t, srv, "evt_1", `{"type":"charge.succeeded"}`)
			if resp.StatusCode/100 == 2 {
				ok.Add(1)
			}
			if resp.Header.Get("Idempotent-Replayed") == "true" {
				replayed.Add(1)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let deliveries pile up behind the first
	close(gate)
	wg.Wait()
	if effects.Load() != 1 || ok.Load() != n || replayed.Load() != n-1 {
		t.Fatalf("effects %d, 2xx %d, replayed %d; want 1, %d, %d", effects.Load(), ok.Load(), replayed.Load(), n, n-1)
	}
}

func TestStatusCodes(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	srv := newServer(t, webhook.JSONField("id"), func(_ context.Context, ev *webhook.Event) error {
		runs.Add(1)
		switch {
		case strings.Contains(string(ev.Body), "fail"):
			return errors.New("refund exceeds charge")
		case strings.Contains(string(ev.Body), "later"):
			return idem.Release(errors.New("db busy"))
		case strings.Contains(string(ev.Body), "lost"):
			return idem.Unknown(errors.New("provider timeout"))
		}
		return nil
	})
	cases := []struct {
		name, body string
		status     int
		outcome    string
	}{
		{"first", `{"id":"e1","x":1}`, 200, "succeeded"},
		{"duplicate", `{"id":"e1","x":1}`, 200, "succeeded"},
		{"mismatch", `{"id":"e1","x":2}`, 422, "mismatch"},
		{"failed", `{"id":"e2","x":"fail"}`, 200, "failed"},
		{"failed replay", `{"id":"e2","x":"fail"}`, 200, "failed"},
		{"released", `{"id":"e3","x":"later"}`, 503, "released"},
		{"unknown", `{"id":"e4","x":"lost"}`, 202, "unknown"},
		{"unknown again", `{"id":"e4","x":"lost"}`, 202, "unknown"},
		{"no id", `{"x":1}`, 400, "invalid_event_id"},
		{"bad id", `{"id":"a\u0001b"}`, 400, "invalid_event_id"},
		{"too large", `{"id":"e5","pad":"` + strings.Repeat("x", 2000) + `"}`, 413, "too_large"},
	}
	for _, c := range cases {
		resp := post(t, srv, "", c.body)
		if resp.StatusCode != c.status || resp.Header.Get("Idem-Outcome") != c.outcome {
			t.Errorf("%s: %d %s; want %d %s", c.name, resp.StatusCode, resp.Header.Get("Idem-Outcome"), c.status, c.outcome)
		}
	}
	// e1 once, e2 once, e3 once (released), e4 once: duplicates never ran.
	if runs.Load() != 4 {
		t.Fatalf("handler ran %d times, want 4", runs.Load())
	}
	// A released event runs again on redelivery.
	if resp := post(t, srv, "", `{"id":"e3","x":"later"}`); resp.StatusCode != 503 || runs.Load() != 5 {
		t.Fatalf("released redelivery: %d, runs %d", resp.StatusCode, runs.Load())
	}
}

func TestMissingHeaderIs400(t *testing.T) {
	t.Parallel()
	srv := newServer(t, webhook.Header("X-Event-Id"), func(context.Context, *webhook.Event) error { return nil })
	if resp := post(t, srv, "", `{}`); resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp := post(t, srv, "ok-1", `{}`); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// Two receivers share an engine with different scopes (two providers): the
// same event id from each is a different event, and both effects run.
func TestScopeSeparatesReceivers(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	var mu sync.Mutex
	effects := map[string]int{}
	receiver := func(provider string) *httptest.Server {
		hd, err := webhook.New(webhook.Config{Engine: e, EventID: webhook.Header("X-Event-Id"),
			Scope: func(*http.Request) string { return provider }},
			func(_ context.Context, ev *webhook.Event) error {
				mu.Lock()
				defer mu.Unlock()
				effects[provider+"/"+ev.ID]++
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(hd)
		t.Cleanup(srv.Close)
		return srv
	}
	stripe, shop := receiver("stripe"), receiver("shop")
	for _, srv := range []*httptest.Server{stripe, shop} {
		if resp := post(t, srv, "evt_1", `{"n":1}`); resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first delivery: %d, replayed %q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
		}
	}
	// A redelivery to either is still a duplicate within its scope.
	if resp := post(t, shop, "evt_1", `{"n":1}`); resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("redelivery: %d, replayed %q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	if effects["stripe/evt_1"] != 1 || effects["shop/evt_1"] != 1 || len(effects) != 2 {
		t.Fatalf("effects %v, want one per provider", effects)
	}
}
