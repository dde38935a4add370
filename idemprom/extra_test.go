package idemprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

// gauge returns the value of the named metric with the given labels (a
// histogram's sample count).
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return value(m)
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestDuplicateRatio(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "idem_duplicate_ratio", nil); got != 0 {
		t.Fatalf("ratio before any call = %v", got)
	}
	eng, _ := idem.New(memstore.New(), idem.Config{Observer: obs})
	ctx := context.Background()
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }
	for range 4 { // one first call, three replays
		if _, err := eng.DoBytes(ctx, idem.Request{Key: "k"}, h); err != nil {
			t.Fatal(err)
		}
	}
	obs.Observe(ctx, idem.Event{Kind: idem.EventOutcome, Outcome: idem.OutcomeError}) // not counted
	if got := gauge(t, reg, "idem_duplicate_ratio", nil); got != 0.75 {
		t.Fatalf("idem_duplicate_ratio = %v, want 0.75", got)
	}
}

func TestStoreCollector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	st := memstore.New()
	now := time.Now().UTC().Truncate(time.Microsecond)
	clock := now
	c, err := idemprom.NewStoreCollector(reg, st, idemprom.StoreCollectorConfig{Clock: func() time.Time { return clock }, MinInterval: time.Nanosecond})
	if err != nil || c == nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim := func(key string, at time.Time, lease time.Duration) {
		if _, err := st.Claim(ctx, idem.ClaimParams{Key: key, AttemptID: key, Now: at, LeaseUntil: at.Add(lease)}); err != nil {
			t.Fatal(err)
		}
	}
	claim("crashed", now.Add(-2*time.Hour), time.Minute) // lease long gone: unknown to every reader
	claim("live", now.Add(-3*time.Hour), 24*time.Hour)   // older, but its lease is live
	claim("unknown", now.Add(-time.Hour), time.Minute)
	if _, err := st.Finish(ctx, idem.FinishParams{Key: "unknown", Fence: 1, AttemptID: "unknown", State: idem.StateUnknown, CompletedAt: now}); err != nil {
		t.Fatal(err)
	}
	if n, age := gauge(t, reg, "idem_unknown_records", nil), gauge(t, reg, "idem_oldest_unknown_age_seconds", nil); n != 2 || age != 7200 {
		t.Fatalf("unknown = %v, oldest age = %v; want 2 and 7200", n, age)
	}
	clock = clock.Add(time.Minute)
	if age := gauge(t, reg, "idem_oldest_unknown_age_seconds", nil); age != 7260 {
		t.Fatalf("age a minute later = %v", age)
	}
	_ = st.Close() // reads now fail: the last values stay, the error is counted
	clock = clock.Add(time.Minute)
	if n, errs := gauge(t, reg, "idem_unknown_records", nil), gauge(t, reg, "idem_store_scrape_errors_total", nil); n != 2 || errs < 1 {
		t.Fatalf("after a failed read: unknown %v, errors %v", n, errs)
	}
}

func TestReconcileMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := idemprom.NewReconcileMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	m.Observe(&reconcile.Report{StartedAt: start, FinishedAt: start.Add(time.Second),
		Counts:     map[reconcile.Class]int{reconcile.ClassDrift: 2, reconcile.ClassReconciled: 5},
		DriftCount: 2, DriftAmount: map[string]int64{"EUR": 150, "USD": 7},
		OldestUnreconciled: time.Hour}, nil)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"idem_reconcile_drift_count", nil, 2},
		{"idem_reconcile_drift_amount", map[string]string{"currency": "EUR"}, 150},
		{"idem_reconcile_keys", map[string]string{"class": "reconciled"}, 5},
		{"idem_reconcile_keys", map[string]string{"class": "over_counted"}, 0},
		{"idem_reconcile_runs_total", map[string]string{"result": "ok"}, 1},
		{"idem_reconcile_last_success_timestamp_seconds", nil, float64(start.Add(time.Second).UnixNano()) / 1e9},
	}
	for _, c := range checks {
		if got := gauge(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if age := gauge(t, reg, "idem_reconcile_oldest_unreconciled_age_seconds", nil); age < 3600 {
		t.Errorf("oldest unreconciled age = %v, want at least an hour", age)
	}
	// A run that stopped keeps the last success time and every gauge: its
	// empty report must not clear the drift alert.
	m.Observe(&reconcile.Report{StartedAt: time.Now(), FinishedAt: time.Now(), Counts: map[reconcile.Class]int{}}, errors.New("store down"))
	lastOK := float64(start.Add(time.Second).UnixNano()) / 1e9
	if got := gauge(t, reg, "idem_reconcile_last_success_timestamp_seconds", nil); got != lastOK {
		t.Errorf("last success moved on a failed run: %v", got)
	}
	if got := gauge(t, reg, "idem_reconcile_drift_count", nil); got != 2 {
		t.Errorf("drift_count after a run that stopped = %v, want the last complete run's 2", got)
	}
	if got := gauge(t, reg, "idem_reconcile_runs_total", map[string]string{"result": "error"}); got != 1 {
		t.Errorf("error runs = %v", got)
	}
	// A run with undecided keys sets the gauges but is not a success.
	m.Observe(&reconcile.Report{StartedAt: time.Now(), FinishedAt: time.Now(),
		Counts: map[reconcile.Class]int{reconcile.ClassDrift: 1}, DriftCount: 1, Errors: []string{"k: provider down"}}, nil)
	if got := gauge(t, reg, "idem_reconcile_last_success_timestamp_seconds", nil); got != lastOK {
		t.Errorf("last success moved on a partial run: %v", got)
	}
	if got := gauge(t, reg, "idem_reconcile_runs_total", map[string]string{"result": "partial"}); got != 1 {
		t.Errorf("partial runs = %v", got)
	}
	if got := gauge(t, reg, "idem_reconcile_drift_count", nil); got != 1 {
		t.Errorf("drift_count after a partial run = %v, want 1", got)
	}
	// A complete clean run clears drift.
	m.Observe(&reconcile.Report{StartedAt: time.Now(), FinishedAt: time.Now(), Counts: map[reconcile.Class]int{}}, nil)
	if n, _ := testutil.GatherAndCount(reg, "idem_reconcile_drift_amount"); n != 0 {
		t.Errorf("drift_amount series after a clean report: %d", n)
	}
	if age := gauge(t, reg, "idem_reconcile_oldest_unreconciled_age_seconds", nil); age != 0 {
		t.Errorf("oldest unreconciled age after a clean report = %v", age)
	}
}

// Conflicts and mismatches found the key already used: they count in the
// ratio's numerator as replays do.
func TestDuplicateRatioCountsConflictAndMismatch(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(memstore.New(), idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := eng.DoBytes(ctx, idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("ok"), nil
		})
		done <- err
	}()
	<-started
	var ife *idem.InFlightError
	_, err = eng.DoBytes(ctx, idem.Request{Key: "k", Policy: idem.Policy{InFlight: idem.InFlightReject}},
		func(context.Context, *idem.Attempt) ([]byte, error) { t.Error("duplicate ran"); return nil, nil })
	if !errors.As(err, &ife) {
		t.Fatalf("duplicate while in flight: %v, want an InFlightError", err)
	}
	if got := gauge(t, reg, "idem_duplicate_ratio", nil); got != 1 { // the conflict is the only call ended
		t.Fatalf("idem_duplicate_ratio after a conflict = %v, want 1", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, err = eng.DoBytes(ctx, idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("other"))},
		func(context.Context, *idem.Attempt) ([]byte, error) { t.Error("mismatch ran"); return nil, nil })
	if !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("other fingerprint: %v, want ErrMismatch", err)
	}
	// first, conflict, mismatch: two of three found the key used.
	if got := gauge(t, reg, "idem_duplicate_ratio", nil); got != 2.0/3 {
		t.Fatalf("idem_duplicate_ratio = %v, want 2/3", got)
	}
	for _, out := range []string{"first", "conflict", "mismatch"} {
		if got := testutil.ToFloat64(obs.Requests().WithLabelValues("", out)); got != 1 {
			t.Errorf("idem_requests_total{outcome=%q} = %v, want 1", out, got)
		}
	}
}

// A store failure is an error; not-found and fenced are the contract's
// normal answers and count as ok.
func TestStoreOpResult(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range []struct {
		op  string
		err error
	}{
		{"get", fmt.Errorf("get: %w", idem.ErrStoreUnavailable)},
		{"get", fmt.Errorf("get: %w", idem.ErrNotFound)},
		{"get", nil},
		{"finish", idem.ErrFenced},
		{"claim", &idem.StoreError{Op: "claim", Err: errors.New("connection refused")}},
	} {
		obs.Observe(ctx, idem.Event{Kind: idem.EventStore, StoreOp: ev.op, Duration: time.Millisecond, Err: ev.err})
	}
	for _, c := range []struct {
		op, result string
		want       float64
	}{
		{"get", "ok", 2},
		{"get", "error", 1},
		{"finish", "ok", 1},
		{"claim", "error", 1},
	} {
		if got := gauge(t, reg, "idem_store_op_duration_seconds", map[string]string{"op": c.op, "result": c.result}); got != c.want {
			t.Errorf("idem_store_op_duration_seconds{op=%q,result=%q} count = %v, want %v", c.op, c.result, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "idem_store_op_duration_seconds"); err != nil || n != 4 {
		t.Errorf("store op series: %d, %v; want 4 (no finish/error, no claim/ok)", n, err)
	}
}
