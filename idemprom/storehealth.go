package idemprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

// storeHealth holds the gauges that say whether the engine can trust its
// store: idem_store_volatile is 1 when the engine started on a store that
// can forget recorded outcomes (idem.Config.AllowVolatileStore), and
// idem_store_clock_offset_seconds is the last measured offset of the
// engine's clock to the store's (store minus engine).
type storeHealth struct {
	volatile, offset prometheus.Gauge
}

func newStoreHealth() storeHealth {
	return storeHealth{
		volatile: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_store_volatile",
			Help: "1 when the engine runs on a store that can forget recorded outcomes (started with AllowVolatileStore): a retry after a lost record runs its effect again.",
		}),
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_store_clock_offset_seconds",
			Help: "Last measured offset of this engine's clock to the store's clock (store minus engine); leases and expiry are decided on the store's.",
		}),
	}
}

func (h storeHealth) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.volatile, h.offset}
}

func (h storeHealth) observe(ev idem.Event) {
	switch ev.Kind {
	case idem.EventVolatileStore:
		h.volatile.Set(1)
	case idem.EventClockOffset:
		h.offset.Set(ev.Duration.Seconds())
	}
}
