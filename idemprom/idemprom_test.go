package idemprom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

func TestCountsOutcomes(t *testing.T) {
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
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }
	req := idem.Request{Key: "k", Operation: "charge"}
	for range 3 {
		if _, err := eng.DoBytes(ctx, req, h); err != nil {
			t.Fatal(err)
		}
	}
	req.Fingerprint = idem.NewFingerprint([]byte("other"))
	if _, err := eng.DoBytes(ctx, req, h); !errors.Is(err, idem.ErrMismatch) {
		t.Fatal(err)
	}
	for outcome, want := range map[string]float64{"first": 1, "replay": 2, "mismatch": 1} {
		got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", outcome))
		if got != want {
			t.Errorf("idem_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(obs.InFlight().WithLabelValues("charge")); got != 0 {
		t.Errorf("in flight after the calls = %v, want 0", got)
	}
	obs.Observe(ctx, idem.Event{Kind: idem.EventWait, Duration: time.Second})
	if n, err := testutil.GatherAndCount(reg, "idem_store_op_duration_seconds", "idem_wait_seconds"); err != nil || n < 2 {
		t.Fatalf("store and wait series: %d, %v", n, err)
	}
}
