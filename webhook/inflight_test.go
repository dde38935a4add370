package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/webhook"
)

// TestInFlightDeliveryIsRedelivered: a redelivery that arrives while the
// first delivery of its event is still running past the wait bound is
// answered 503 with Retry-After, so the provider redelivers it later. A
// 2xx would make the provider stop, though the outcome is not known yet
// (the first delivery may still fail or end unknown). The first delivery
// is held until the redelivery has its answer: no timing decides it.
func TestInFlightDeliveryIsRedelivered(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	entered, gate := make(chan struct{}), make(chan struct{})
	runs := 0
	hd, err := webhook.New(webhook.Config{Engine: e, EventID: webhook.Header("X-Event-Id"), Policy: idem.Policy{Wait: 50 * time.Millisecond}},
		func(context.Context, *webhook.Event) error {
			runs++
			close(entered)
			<-gate
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(`{"type":"charge.succeeded"}`))
		req.Header.Set("X-Event-Id", "evt_1")
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, req)
		return w
	}
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- deliver() }()
	<-entered
	dup := deliver()
	close(gate)
	if dup.Code != http.StatusServiceUnavailable || dup.Header().Get("Idem-Outcome") != "in_flight" || dup.Header().Get("Retry-After") == "" {
		t.Fatalf("redelivery while the first runs: %d %s, Retry-After %q; want 503 in_flight with Retry-After",
			dup.Code, dup.Header().Get("Idem-Outcome"), dup.Header().Get("Retry-After"))
	}
	if w := <-first; w.Code != http.StatusOK || w.Header().Get("Idem-Outcome") != "succeeded" {
		t.Fatalf("first delivery: %d %s", w.Code, w.Header().Get("Idem-Outcome"))
	}
	if w := deliver(); w.Code != http.StatusOK || w.Header().Get("Idempotent-Replayed") != "true" || runs != 1 {
		t.Fatalf("redelivery after the first finished: %d, replayed %q, runs %d; want a 200 replay and one run",
			w.Code, w.Header().Get("Idempotent-Replayed"), runs)
	}
}
