package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// The engine's own crash tests, on memstore: the process holding an
// attempt dies after the claim, during the effect, after the effect before
// its outcome is recorded, or after the outcome is recorded (its answer
// lost); past the lease, a duplicate sent to a restarted process must be
// told unknown and never re-run the effect in the first three cases, and
// get the recorded value in the last.
func TestEngineCrashAtEachPhase(t *testing.T) {
	t.Parallel()
	for _, ph := range []storetest.Phase{storetest.AfterClaim, storetest.DuringEffect, storetest.AfterEffect, storetest.AfterRecord} {
		t.Run(ph.String(), func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			clock := storetest.NewClock()
			cfg := idem.Config{Lease: time.Second, Clock: clock.Now}
			var runs atomic.Int64
			charge := func(context.Context, *idem.Attempt) ([]byte, error) {
				return fmt.Appendf(nil, "charge %d", runs.Add(1)), nil
			}
			req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("100 EUR"))}
			ctx := context.Background()

			deadCfg := cfg
			deadCfg.FinishTimeout = 50 * time.Millisecond // a dead process stops trying soon
			dead, err := idem.New(storetest.NewPhaseStore(st, ph), deadCfg)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = dead.DoBytes(ctx, req, charge)
			_ = dead.Close()
			ranBefore := runs.Load()

			clock.Advance(cfg.Lease + time.Second)
			live, err := idem.New(st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()
			res, err := live.DoBytes(ctx, req, charge)
			if ph == storetest.AfterRecord {
				if err != nil || !res.Replayed || string(res.Value) != "charge 1" {
					t.Fatalf("crash %v: duplicate = %q (replayed %v), %v; want the recorded \"charge 1\" replayed", ph, res.Value, res.Replayed, err)
				}
			} else if !errors.Is(err, idem.ErrUnknownOutcome) {
				t.Fatalf("crash %v: duplicate = %q, %v; want ErrUnknownOutcome", ph, res.Value, err)
			}
			if runs.Load() != ranBefore {
				t.Fatalf("crash %v: the duplicate re-ran the effect (%d runs before it, %d after)", ph, ranBefore, runs.Load())
			}
		})
	}
}

// A claim and an outcome whose answers are lost after the store applied
// them run the effect once, and the duplicate replays it.
func TestEngineLostAnswersRunOnce(t *testing.T) {
	t.Parallel()
	st := storetest.NewLossyStore(memstore.New(), map[string]int{"claim": 1, "finish": 1})
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var runs atomic.Int64
	charge := func(context.Context, *idem.Attempt) ([]byte, error) {
		return fmt.Appendf(nil, "charge %d", runs.Add(1)), nil
	}
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("100 EUR"))}
	a, err := e.DoBytes(context.Background(), req, charge)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.DoBytes(context.Background(), req, charge)
	if err != nil || !b.Replayed || string(b.Value) != string(a.Value) || runs.Load() != 1 {
		t.Fatalf("after lost answers: %q then %q (replayed %v), %v, %d runs; want one run replayed", a.Value, b.Value, b.Replayed, err, runs.Load())
	}
}
