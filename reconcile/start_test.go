package reconcile_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestStartStop runs the reconciler as a service: it runs at once, reports
// through OnRun, refuses a second Start, and Stop waits for it.
func TestStartStop(t *testing.T) {
	t.Parallel()
	runs := make(chan *reconcile.Report, 4)
	f := newFixture(t, memstore.New(), reconcile.Config{})
	f.reconciler(reconcile.Config{Interval: time.Hour, OnRun: func(r *reconcile.Report, err error) {
		if err == nil {
			runs <- r
		}
	}})
	f.charge("a", 100, "EUR", ok)
	f.prov.apply("fwd-a", 100, "EUR", f.clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.rec.Start(ctx); err == nil {
		t.Fatal("second Start accepted")
	}
	select {
	case r := <-runs:
		wantClass(t, r, reconcile.ClassReconciled, "a")
	case <-time.After(30 * time.Second):
		t.Fatal("no run reported")
	}
	f.rec.Stop()
	f.rec.Stop() // idempotent
	wantState(t, f.get("a"), "succeeded", "reconciled")
}
