package idemprom

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem/reconcile"
)

// ReconcileMetrics exports reconciliation reports. Pass its Observe method
// as reconcile.Config.OnRun.
//
//	idem_reconcile_runs_total{result}                   runs, result ok, partial or error
//	idem_reconcile_last_success_timestamp_seconds       end of the last complete run (Unix time)
//	idem_reconcile_keys{class}                          keys per class in the last run
//	idem_reconcile_drift_count                          drift findings in the last run
//	idem_reconcile_drift_amount{currency}               sum of absolute drift, minor units, last run
//	idem_reconcile_oldest_unreconciled_age_seconds      age of the oldest record not reconciled; grows between runs
type ReconcileMetrics struct {
	runs        *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	keys        *prometheus.GaugeVec
	driftCount  prometheus.Gauge
	driftAmount *prometheus.GaugeVec

	clock  func() time.Time
	mu     sync.Mutex
	oldest time.Time // claim time of the oldest unreconciled record; zero when none
}

// NewReconcileMetrics registers the reconciliation metrics with reg.
func NewReconcileMetrics(reg prometheus.Registerer) (*ReconcileMetrics, error) {
	m := &ReconcileMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idem_reconcile_runs_total",
			Help: "Reconciliation runs by result (ok, partial: some keys could not be decided, error: the run stopped)."}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "idem_reconcile_last_success_timestamp_seconds",
			Help: "Unix time at which the last complete reconciliation run (every key decided) finished."}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idem_reconcile_keys",
			Help: "Keys per reconciliation class in the last run."}, []string{"class"}),
		driftCount: prometheus.NewGauge(prometheus.GaugeOpts{Name: "idem_reconcile_drift_count",
			Help: "Drift findings (amount, currency or outcome differs) in the last run."}),
		driftAmount: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idem_reconcile_drift_amount",
			Help: "Sum of absolute drift per currency in the last run, in minor units."}, []string{"currency"}),
		clock: time.Now,
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idem_reconcile_oldest_unreconciled_age_seconds",
		Help: "Age of the oldest record left not reconciled by the last run; it grows until a run clears it."}, m.oldestAge)
	for _, c := range []prometheus.Collector{m.runs, m.lastSuccess, m.keys, m.driftCount, m.driftAmount, age} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"ok", "partial", "error"} {
		m.runs.WithLabelValues(r)
	}
	return m, nil
}

// Observe records one run's report; it has the signature of
// reconcile.Config.OnRun.
//
// A run that stopped (err set) counts as an error and changes nothing
// else: its report is partial, and lowering the gauges from it would clear
// alerts on findings it never reached. A run that left keys undecided
// (Report.Errors) counts as partial: its gauges are set (a finding of an
// earlier run that the provider could not re-check is kept, see
// reconcile.Finding.Kept) but it is not a success, so the
// last-success time — and the alert on it — tells that reconciliation is
// not getting through.
func (m *ReconcileMetrics) Observe(rep *reconcile.Report, err error) {
	switch {
	case err != nil || rep == nil:
		m.runs.WithLabelValues("error").Inc()
		return
	case len(rep.Errors) > 0:
		m.runs.WithLabelValues("partial").Inc()
	default:
		m.runs.WithLabelValues("ok").Inc()
		m.lastSuccess.Set(float64(rep.FinishedAt.UnixNano()) / 1e9)
	}
	for _, c := range reconcile.Classes {
		m.keys.WithLabelValues(string(c)).Set(float64(rep.Counts[c]))
	}
	m.driftCount.Set(float64(rep.DriftCount))
	m.driftAmount.Reset() // a currency whose drift cleared must not keep its old value
	for cur, amt := range rep.DriftAmount {
		m.driftAmount.WithLabelValues(cur).Set(float64(amt))
	}
	m.mu.Lock()
	m.oldest = time.Time{}
	if rep.OldestUnreconciled > 0 {
		m.oldest = rep.StartedAt.Add(-rep.OldestUnreconciled)
	}
	m.mu.Unlock()
}

func (m *ReconcileMetrics) oldestAge() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.oldest.IsZero() {
		return 0
	}
	return max(m.clock().Sub(m.oldest).Seconds(), 0)
}
