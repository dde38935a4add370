package idemprom_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
)

// TestScopeQuotaCounter: each EventScopeQuota counts once under its quota.
func TestScopeQuotaCounter(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"rate", "rate", "inflight"} {
		obs.Observe(context.Background(), idem.Event{Kind: idem.EventScopeQuota, Quota: q, Scope: "s", Key: "k"})
	}
	if n := gauge(t, reg, "idem_scope_quota_rejected_total", map[string]string{"quota": "rate"}); n != 2 {
		t.Fatalf("rate = %v, want 2", n)
	}
	if n := gauge(t, reg, "idem_scope_quota_rejected_total", map[string]string{"quota": "inflight"}); n != 1 {
		t.Fatalf("inflight = %v, want 1", n)
	}
}
