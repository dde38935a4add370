// Package idemprom exports idem engine events as Prometheus metrics.
//
// [New] returns an [idem.Observer]; pass it as idem.Config.Observer. All
// metric names have the idem_ prefix; keys and scopes are never exported.
//
//	idem_requests_total{operation,outcome}      engine calls by outcome (first, replay, conflict, mismatch, released, failed, unknown, fenced, lost_claim, error, cancelled)
//	idem_in_flight{operation}                   effects running now
//	idem_wait_seconds                           time duplicates waited for an in-flight attempt
//	idem_store_op_duration_seconds{op,result}   store operation latency (result: ok, error, or cancelled when the caller went away)
//	idem_client_gone_total{operation}           clients that went away before their response reached them
//	idem_scope_quota_rejected_total{quota}      requests refused by a per-scope quota (inflight, rate) before they ran
//	idem_spooled_outcomes                       outcomes held in the engine's spool, waiting for the store
//	idem_duplicate_ratio                        share of calls that found the key already used (replay, conflict, mismatch)
//	idem_store_volatile                         1 when started on a store that can forget (AllowVolatileStore)
//	idem_store_clock_offset_seconds             last measured offset of the engine's clock to the store's
//	idem_store_replication_safe                 1 when a failover cannot lose an acknowledged claim, 0 when started on one that can (AllowAsyncReplication)
//	idem_store_lost_claims_total                outcome writes that found their claim lost by the store (a failover, a forgetting store)
//
// [NewStoreCollector] adds the unknown-record gauges (idem_unknown_records,
// idem_oldest_unknown_age_seconds) read from the store,
// [NewReconcileMetrics] the reconciliation metrics (idem_reconcile_*), and
// [NewUnkeyedRequests] idem_unkeyed_requests_total{method,result}, the
// requests of a protected method that came without an Idempotency-Key.
// docs/metrics.md lists them all.
package idemprom

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

// Observer is an [idem.Observer] that updates Prometheus metrics.
type Observer struct {
	requests *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	wait     prometheus.Histogram
	storeOp  *prometheus.HistogramVec
	gone     *prometheus.CounterVec
	quota    *prometheus.CounterVec
	spooled  prometheus.Gauge
	health   storeHealth

	calls, duplicates atomic.Int64 // for idem_duplicate_ratio
}

var _ idem.Observer = (*Observer)(nil)

// New registers the metrics with reg and returns the observer.
func New(reg prometheus.Registerer) (*Observer, error) {
	o := &Observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_requests_total",
			Help: "Engine calls by outcome: first, replay, conflict, mismatch, released, failed, unknown, fenced, error (the store failed), cancelled (the caller went away first).",
		}, []string{"operation", "outcome"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "idem_in_flight",
			Help: "Effects running now.",
		}, []string{"operation"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "idem_wait_seconds",
			Help:    "Time duplicates waited for an in-flight attempt to finish.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		storeOp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_store_op_duration_seconds",
			Help:    "Store operation latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"op", "result"}),
		gone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_client_gone_total",
			Help: "Clients that went away (disconnected or stopped reading) after their effect started, before its response reached them; the outcome is kept.",
		}, []string{"operation"}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_scope_quota_rejected_total",
			Help: "Requests refused by a per-scope quota before they ran (quota: inflight, rate); nothing was recorded for them.",
		}, []string{"quota"}),
		spooled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idem_spooled_outcomes",
			Help: "Outcomes held in the engine's local spool because the store could not take them; applied when it answers.",
		}),
		health: newStoreHealth(),
	}
	ratio := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idem_duplicate_ratio",
		Help: "Share of engine calls (store errors excluded) that found their key already used: replay, conflict or mismatch.",
	}, o.duplicateRatio)
	for _, c := range append([]prometheus.Collector{o.requests, o.inFlight, o.wait, o.storeOp, o.gone, o.quota, o.spooled, ratio}, o.health.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Observe implements [idem.Observer].
func (o *Observer) Observe(ctx context.Context, ev idem.Event) {
	switch ev.Kind {
	case idem.EventOutcome:
		out := string(ev.Outcome)
		if ev.Outcome == idem.OutcomeError && cancelled(ctx, ev.Err) {
			out = cancelledLabel
		}
		o.requests.WithLabelValues(ev.Operation, out).Inc()
		o.countDuplicate(ev.Outcome)
	case idem.EventInFlight:
		o.inFlight.WithLabelValues(ev.Operation).Add(float64(ev.Delta))
	case idem.EventSpool:
		o.spooled.Add(float64(ev.Delta))
	case idem.EventWait:
		o.wait.Observe(ev.Duration.Seconds())
	case idem.EventVolatileStore, idem.EventClockOffset, idem.EventReplication, idem.EventLostClaim:
		o.health.observe(ev)
	case idem.EventStore:
		result := "ok"
		switch {
		case ev.Err == nil, contractAnswer(ev.Err):
		case cancelled(ctx, ev.Err):
			result = cancelledLabel
		default:
			result = "error"
		}
		o.storeOp.WithLabelValues(ev.StoreOp, result).Observe(ev.Duration.Seconds())
	case idem.EventClientGone:
		o.gone.WithLabelValues(ev.Operation).Inc()
	case idem.EventScopeQuota:
		o.quota.WithLabelValues(ev.Quota).Inc()
	}
}

// cancelledLabel is the outcome and result of a call or store operation cut
// short because its caller went away: not a store failure, so that alerts
// on store errors do not fire for clients that hang up.
const cancelledLabel = "cancelled"

// cancelled reports whether a failed call or store operation failed
// because its caller went away: the error is the context's, or the
// caller's context was cancelled while it ran (a driver then reports the
// interruption with an error of its own).
func cancelled(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(ctx.Err(), context.Canceled)
}

// contractAnswer reports errors that are the store contract's normal
// answers rather than failures.
func contractAnswer(err error) bool {
	return errors.Is(err, idem.ErrNotFound) || errors.Is(err, idem.ErrFenced)
}

// Requests returns the idem_requests_total counter, for tests and for
// callers that add their own outcomes.
func (o *Observer) Requests() *prometheus.CounterVec { return o.requests }

// ClientGone returns the idem_client_gone_total counter.
func (o *Observer) ClientGone() *prometheus.CounterVec { return o.gone }

// InFlight returns the idem_in_flight gauge.
func (o *Observer) InFlight() *prometheus.GaugeVec { return o.inFlight }

func (o *Observer) countDuplicate(out idem.Outcome) {
	switch out {
	case idem.OutcomeError, idem.OutcomeCancelled:
		return // nothing was decided about the key
	case idem.OutcomeReplay, idem.OutcomeConflict, idem.OutcomeMismatch:
		o.duplicates.Add(1)
	}
	o.calls.Add(1)
}

// duplicateRatio is duplicates over decided calls since start; 0 before any.
func (o *Observer) duplicateRatio() float64 {
	n := o.calls.Load()
	if n == 0 {
		return 0
	}
	return float64(o.duplicates.Load()) / float64(n)
}
