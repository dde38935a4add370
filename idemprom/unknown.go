package idemprom

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

// StoreCollectorConfig configures [NewStoreCollector].
type StoreCollectorConfig struct {
	// MinInterval is the shortest time between two reads of the store;
	// scrapes in between get the last values. Defaults to 30s.
	MinInterval time.Duration
	// Timeout bounds one read of the store. Defaults to 10s.
	Timeout time.Duration
	// MaxScan caps how many records one read lists; unknown records should
	// be few, and a flood of them is visible at the cap. Defaults to 100000.
	MaxScan int
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
}

// StoreCollector exports what only the store knows: how many records are
// unknown (including in_progress records whose lease has passed, which
// every reader treats as unknown) and the age of the oldest one.
//
//	idem_unknown_records              records whose outcome is unknown now
//	idem_oldest_unknown_age_seconds   age of the oldest, since its claim; 0 when none
//	idem_store_scrape_errors_total    failed reads of the store
type StoreCollector struct {
	store idem.Store
	cfg   StoreCollectorConfig

	countDesc, ageDesc *prometheus.Desc
	errors             prometheus.Counter

	mu     sync.Mutex
	readAt time.Time
	count  int
	oldest time.Time // CreatedAt of the oldest unknown record
}

// NewStoreCollector registers the unknown-record gauges for store with reg.
func NewStoreCollector(reg prometheus.Registerer, store idem.Store, cfg StoreCollectorConfig) (*StoreCollector, error) {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 30 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxScan <= 0 {
		cfg.MaxScan = 100000
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &StoreCollector{store: store, cfg: cfg,
		countDesc: prometheus.NewDesc("idem_unknown_records", "Records whose outcome is unknown (including in_progress past their lease).", nil, nil),
		ageDesc:   prometheus.NewDesc("idem_oldest_unknown_age_seconds", "Age of the oldest unknown record since its claim; 0 when there is none.", nil, nil),
		errors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "idem_store_scrape_errors_total", Help: "Failed reads of the store for the unknown-record gauges."}),
	}
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Describe implements [prometheus.Collector].
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.countDesc
	ch <- c.ageDesc
	c.errors.Describe(ch)
}

// Collect implements [prometheus.Collector]. The age is computed at each
// scrape from the oldest claim time, so it grows between reads of the store.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.cfg.Clock()
	if c.readAt.IsZero() || now.Sub(c.readAt) >= c.cfg.MinInterval {
		if err := c.read(now); err != nil {
			c.errors.Inc()
		} else {
			c.readAt = now
		}
	}
	count, oldest := c.count, c.oldest
	c.mu.Unlock()
	age := 0.0
	if count > 0 {
		age = max(now.Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.countDesc, prometheus.GaugeValue, float64(count))
	ch <- prometheus.MustNewConstMetric(c.ageDesc, prometheus.GaugeValue, age)
	c.errors.Collect(ch)
}

// read lists unknown and in_progress records, oldest first, and keeps the
// count and the oldest claim time of those that are unknown at now.
func (c *StoreCollector) read(now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	recs, err := c.store.List(ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown, idem.StateInProgress}, Limit: c.cfg.MaxScan})
	if err != nil {
		return err
	}
	c.count, c.oldest = 0, time.Time{}
	for i := range recs {
		if recs[i].EffectiveState(now) != idem.StateUnknown {
			continue
		}
		if c.count == 0 {
			c.oldest = recs[i].CreatedAt // List is oldest first
		}
		c.count++
	}
	return nil
}
