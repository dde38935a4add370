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

// hangingStore's Claim waits for its caller to go away, then fails as a
// driver does when its query is interrupted: with an error of its own, not
// the context's. With fail set it fails at once instead.
type hangingStore struct {
	*memstore.Store
	fail    bool
	entered chan struct{} // receives once a Claim waits
}

func (s hangingStore) Claim(ctx context.Context, _ idem.ClaimParams) (idem.ClaimResult, error) {
	if !s.fail {
		s.entered <- struct{}{}
		<-ctx.Done()
	}
	return idem.ClaimResult{}, errors.New("driver: connection interrupted")
}

// A caller that went away before (or while) its key was claimed is counted
// as cancelled: neither the store-error series the alerts watch nor the
// error outcome moves. A store that fails on its own still counts as error.
func TestCancelledCallIsNotAStoreError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	hang := hangingStore{Store: memstore.New(), entered: make(chan struct{}, 1)}
	eng, err := idem.New(hang, idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return nil, nil }
	req := idem.Request{Key: "k", Operation: "charge"}

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := eng.DoBytes(gone, req, h); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	leaving, cancel := context.WithCancel(context.Background())
	go func() { <-hang.entered; cancel() }()
	if _, err := eng.DoBytes(leaving, req, h); err == nil {
		t.Fatal("a call cancelled during its claim succeeded")
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "cancelled")); got != 2 {
		t.Errorf("idem_requests_total{outcome=cancelled} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "error")); got != 0 {
		t.Errorf("idem_requests_total{outcome=error} = %v, want 0", got)
	}
	if n := storeOps(t, reg, "error"); n != 0 {
		t.Errorf("%d store operations counted as errors for cancelled calls, want 0", n)
	}
	if n := storeOps(t, reg, "cancelled"); n < 1 {
		t.Errorf("the interrupted claim is not counted as cancelled (%d)", n)
	}

	broken, err := idem.New(hangingStore{Store: memstore.New(), fail: true}, idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.DoBytes(context.Background(), req, h); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("failing store: %v, want ErrStoreUnavailable", err)
	}
	if got := testutil.ToFloat64(obs.Requests().WithLabelValues("charge", "error")); got != 1 {
		t.Errorf("a failing store: idem_requests_total{outcome=error} = %v, want 1", got)
	}
	if n := storeOps(t, reg, "error"); n < 1 {
		t.Error("a failing store is not counted as a store error")
	}
}

// storeOps counts the store operations observed with result.
func storeOps(t *testing.T, reg *prometheus.Registry, result string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "idem_store_op_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

func TestCountsClientGone(t *testing.T) {
	t.Parallel()
	obs, err := idemprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(context.Background(), idem.Event{Kind: idem.EventClientGone, Operation: "POST"})
	if got := testutil.ToFloat64(obs.ClientGone().WithLabelValues("POST")); got != 1 {
		t.Fatalf("idem_client_gone_total = %v, want 1", got)
	}
}
