package idemprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

// forgetful is a memory store that reports what an evicting Redis would.
type forgetful struct{ *memstore.Store }

func (forgetful) CheckDurability(context.Context) ([]idem.Finding, error) {
	return []idem.Finding{{Setting: "maxmemory-policy", Value: "allkeys-lru", Problem: "evicts", Fix: "noeviction", Severity: idem.SeverityRefuse}}, nil
}

// TestStoreHealthGauges: an engine started on a store that can forget
// (allowed) sets idem_store_volatile to 1; a clock offset event sets the
// offset gauge.
func TestStoreHealthGauges(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(forgetful{memstore.New()}, idem.Config{Observer: obs, AllowVolatileStore: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	obs.Observe(context.Background(), idem.Event{Kind: idem.EventClockOffset, Duration: -1500 * time.Millisecond})
	for name, want := range map[string]float64{"idem_store_volatile": 1, "idem_store_clock_offset_seconds": -1.5} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() == name {
				found = true
				if got := mf.GetMetric()[0].GetGauge().GetValue(); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		}
		if !found {
			t.Errorf("%s not exported", name)
		}
	}
}
