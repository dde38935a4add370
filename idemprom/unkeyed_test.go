package idemprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem/idemprom"
)

// TestUnkeyedRequests: Init exports the series at zero before any request;
// each Inc counts once under its method and result; registering twice is
// refused.
func TestUnkeyedRequests(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	u, err := idemprom.NewUnkeyedRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	u.Init(idemprom.UnkeyedForwarded, "POST", "PATCH")
	post := map[string]string{"method": "POST", "result": "forwarded"}
	if n := gauge(t, reg, "idem_unkeyed_requests_total", post); n != 0 {
		t.Fatalf("after Init: %v, want 0", n)
	}
	u.Inc("POST", idemprom.UnkeyedForwarded)
	u.Inc("POST", idemprom.UnkeyedForwarded)
	u.Inc("POST", idemprom.UnkeyedRefused)
	if n := gauge(t, reg, "idem_unkeyed_requests_total", post); n != 2 {
		t.Fatalf("forwarded POSTs: %v, want 2", n)
	}
	if n := gauge(t, reg, "idem_unkeyed_requests_total", map[string]string{"method": "POST", "result": "refused"}); n != 1 {
		t.Fatalf("refused POSTs: %v, want 1", n)
	}
	if n := gauge(t, reg, "idem_unkeyed_requests_total", map[string]string{"method": "PATCH", "result": "forwarded"}); n != 0 {
		t.Fatalf("PATCHes: %v, want 0", n)
	}
	if _, err := idemprom.NewUnkeyedRequests(reg); err == nil {
		t.Fatal("a second registration was accepted")
	}
}
