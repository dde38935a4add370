package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// A duplicate waiting on an attempt whose holder died is told unknown when
// the holder's lease runs out, not left waiting until its own bound and then
// told in flight.
func TestWaiterToldUnknownWhenHolderLeaseRunsOut(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	fp := idem.NewFingerprint([]byte("charge 100"))
	now := time.Now()
	// A dead attempt: claimed with a 200ms lease, never heartbeated.
	if _, err := st.Claim(context.Background(), idem.ClaimParams{Key: "k", Fingerprint: fp, AttemptID: "dead",
		Now: now, LeaseUntil: now.Add(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ran := false
	_, err = e.DoBytes(context.Background(), idem.Request{Key: "k", Fingerprint: fp,
		Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: 10 * time.Second}},
		func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrUnknownOutcome) || ran {
		t.Fatalf("waiting on a holder whose lease ran out: %v (effect ran: %v); want ErrUnknownOutcome and no run", err, ran)
	}
}
