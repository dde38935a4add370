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

// asyncReplicated is a memory store that reports what a PostgreSQL with an
// asynchronous standby would.
type asyncReplicated struct{ *memstore.Store }

func (asyncReplicated) CheckReplication(context.Context) (idem.Replication, error) {
	return idem.Replication{Topology: "primary with 1 asynchronous standby", Findings: []idem.Finding{{Setting: "synchronous_standby_names",
		Value: "''", Problem: "a failover loses claims", Fix: "name the standby", Severity: idem.SeverityRefuse}}}, nil
}

// TestReplicationGauge: idem_store_replication_safe is 1 on a store a
// failover cannot make lose a claim, 0 when the engine was allowed to
// start on asynchronous replication; idem_store_lost_claims_total counts
// EventLostClaim.
func TestReplicationGauge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		st   idem.Store
		want float64
	}{
		{"safe", memstore.New(), 1},
		{"async allowed", asyncReplicated{memstore.New()}, 0},
	} {
		reg := prometheus.NewRegistry()
		obs, err := idemprom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := idem.New(tc.st, idem.Config{Observer: obs, AllowAsyncReplication: true})
		if err != nil {
			t.Fatal(err)
		}
		eng.Close()
		if got := gauge(t, reg, "idem_store_replication_safe", nil); got != tc.want {
			t.Errorf("%s: idem_store_replication_safe = %v, want %v", tc.name, got, tc.want)
		}
		obs.Observe(context.Background(), idem.Event{Kind: idem.EventLostClaim, Delta: 1})
		obs.Observe(context.Background(), idem.Event{Kind: idem.EventLostClaim, Delta: 1})
		if got := gauge(t, reg, "idem_store_lost_claims_total", nil); got != 2 {
			t.Errorf("%s: idem_store_lost_claims_total = %v, want 2", tc.name, got)
		}
	}
}
