package idemprom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

// An effect whose outcome could not be decided, and the duplicate told so,
// are counted as idem_requests_total{outcome="unknown"}: the series the
// unknown-outcome alert reads.
func TestCountsUnknownOutcomes(t *testing.T) {
	t.Parallel()
	obs, err := idemprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(memstore.New(), idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	timedOut := func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, idem.Unknown(errors.New("provider timed out"))
	}
	req := idem.Request{Key: "k", Operation: "charge"}
	if _, err := eng.DoBytes(ctx, req, timedOut); err == nil {
		t.Fatal("an unknown outcome returned no error")
	}
	if _, err := eng.DoBytes(ctx, req, timedOut); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("duplicate of an unknown record: %v, want ErrUnknownOutcome", err)
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "unknown")); got != 2 {
		t.Errorf(`idem_requests_total{outcome="unknown"} = %v, want 2 (the call that ended unknown and its duplicate)`, got)
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "failed")); got != 0 {
		t.Errorf(`idem_requests_total{outcome="failed"} = %v, want 0`, got)
	}
}
