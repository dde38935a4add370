package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
)

// The engine's own crash tests, on memstore: a process that dies after the
// claim, during the effect, after the effect before its outcome is
// recorded, or after it is recorded (answer lost), and a duplicate sent to
// a restarted process past the lease. The first three must be unknown and
// never re-run; the last replays. Lost store answers must not re-run the
// effect either. idemtest drives the phases through storetest's fault
// stores.
func TestEngineCrashAtEachPhase(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var charges atomic.Int64
	charge := func(context.Context, *idem.Attempt) ([]byte, error) {
		return fmt.Appendf(nil, "charge %d", charges.Add(1)), nil
	}
	idemtest.Op(t, e, charge, idemtest.OpCase{
		Request: idem.Request{Operation: "charge", Fingerprint: idem.NewFingerprint([]byte("100 EUR"))},
		Checks:  []idemtest.Check{idemtest.Crash, idemtest.LostAnswers},
	})
}
