// Package idemprom exports idem engine events as Prometheus metrics.
//
// [New] returns an [idem.Observer]; pass it as idem.Config.Observer. All
// metric names have the idem_ prefix; keys and scopes are never exported.
//
//	idem_requests_total{operation,outcome}      engine calls by outcome (first, replay, conflict, mismatch, released, failed, unknown, fenced, error)
//	idem_in_flight{operation}                   effects running now
//	idem_wait_seconds                           time duplicates waited for an in-flight attempt
//	idem_store_op_duration_seconds{op,result}   store operation latency (result: ok or error)
package idemprom

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
)

// Observer is an [idem.Observer] that updates Prometheus metrics.
type Observer struct {
	requests *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	wait     prometheus.Histogram
	storeOp  *prometheus.HistogramVec
}

var _ idem.Observer = (*Observer)(nil)

// New registers the metrics with reg and returns the observer.
func New(reg prometheus.Registerer) (*Observer, error) {
	o := &Observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_requests_total",
			Help: "Engine calls by outcome: first, replay, conflict, mismatch, released, failed, unknown, fenced, error.",
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
	}
	for _, c := range []prometheus.Collector{o.requests, o.inFlight, o.wait, o.storeOp} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Observe implements [idem.Observer].
func (o *Observer) Observe(_ context.Context, ev idem.Event) {
	switch ev.Kind {
	case idem.EventOutcome:
		o.requests.WithLabelValues(ev.Operation, string(ev.Outcome)).Inc()
	case idem.EventInFlight:
		o.inFlight.WithLabelValues(ev.Operation).Add(float64(ev.Delta))
	case idem.EventWait:
		o.wait.Observe(ev.Duration.Seconds())
	case idem.EventStore:
		result := "ok"
		if ev.Err != nil && !contractAnswer(ev.Err) {
			result = "error"
		}
		o.storeOp.WithLabelValues(ev.StoreOp, result).Observe(ev.Duration.Seconds())
	}
}

// contractAnswer reports errors that are the store contract's normal
// answers rather than failures.
func contractAnswer(err error) bool {
	return errors.Is(err, idem.ErrNotFound) || errors.Is(err, idem.ErrFenced)
}

// Requests returns the idem_requests_total counter, for tests and for
// callers that add their own outcomes.
func (o *Observer) Requests() *prometheus.CounterVec { return o.requests }

// InFlight returns the idem_in_flight gauge.
func (o *Observer) InFlight() *prometheus.GaugeVec { return o.inFlight }
