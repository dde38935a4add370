package idemprom_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

// TestCountsPanicAsUnknown: an effect that panics leaves its record
// unknown, and the call is counted as idem_requests_total{outcome="unknown"}
// even though the panic unwinds through the engine (which re-raises it): a
// panic must reach the unknown-outcome alert like any other unknown.
func TestCountsPanicAsUnknown(t *testing.T) {
	t.Parallel()
	obs, err := idemprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	eng, err := idem.New(st, idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the effect's panic was not re-raised")
			}
		}()
		_, _ = eng.DoBytes(context.Background(), idem.Request{Key: "k", Operation: "charge"},
			func(context.Context, *idem.Attempt) ([]byte, error) { panic("nil map in the provider client") })
	}()
	if rec, err := st.Get(context.Background(), "", "k"); err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record after the panic = %+v, %v; want unknown", rec, err)
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "unknown")); got != 1 {
		t.Errorf(`idem_requests_total{outcome="unknown"} = %v after a panicking effect, want 1`, got)
	}
	if got := testutil.ToFloat64(obs.InFlight().WithLabelValues("charge")); got != 0 {
		t.Errorf("in-flight gauge = %v after the panic, want 0", got)
	}
}
