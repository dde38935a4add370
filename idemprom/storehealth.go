package idemprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

// storeHealth holds the gauges that say whether the engine can trust its
// store: idem_store_volatile is 1 when the engine started on a store that
// can forget recorded outcomes (idem.Config.AllowVolatileStore), and
// idem_store_clock_offset_seconds is the last measured offset of the
// engine's clock to the store's (store minus engine);
// idem_store_replication_safe is 1 when a failover of the store cannot
// lose an acknowledged claim and 0 when the engine started on replication
// that can (idem.Config.AllowAsyncReplication); idem_store_lost_claims_total
// counts outcome writes that found their claim lost by the store.
type storeHealth struct {
	volatile, offset, replicationSafe prometheus.Gauge
	lostClaims                        prometheus.Counter
}

func newStoreHealth() storeHealth {
	return storeHealth{
		volatile: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_store_volatile",
			Help: "1 when the engine runs on a store that can forget recorded outcomes (started with AllowVolatileStore): a retry after a lost record runs its effect again.",
		}),
		replicationSafe: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_store_replication_safe",
			Help: "1 when a failover of the store cannot lose a claim it acknowledged; 0 when the engine started on replication that can (AllowAsyncReplication): the retries after such a failover run their effects again.",
		}),
		lostClaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idem_store_lost_claims_total",
			Help: "Outcome writes that found the store had lost the claim their effect ran under (a failover to a replica that never had it, a record that vanished): a retry may have run the effect again.",
		}),
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_store_clock_offset_seconds",
			Help: "Last measured offset of this engine's clock to the store's clock (store minus engine); leases and expiry are decided on the store's.",
		}),
	}
}

func (h storeHealth) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.volatile, h.offset, h.replicationSafe, h.lostClaims}
}

func (h storeHealth) observe(ev idem.Event) {
	switch ev.Kind {
	case idem.EventVolatileStore:
		h.volatile.Set(1)
	case idem.EventClockOffset:
		h.offset.Set(ev.Duration.Seconds())
	case idem.EventReplication:
		h.replicationSafe.Set(float64(ev.Delta))
	case idem.EventLostClaim:
		h.lostClaims.Add(float64(ev.Delta))
	}
}
