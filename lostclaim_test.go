package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// lostClaimObserver records EventLostClaim and the outcomes of calls.
type lostClaimObserver struct {
	mu   sync.Mutex
	lost []idem.Event
	outs []idem.Outcome
}

func (o *lostClaimObserver) Observe(_ context.Context, ev idem.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Kind {
	case idem.EventLostClaim:
		o.lost = append(o.lost, ev)
	case idem.EventOutcome:
		o.outs = append(o.outs, ev.Outcome)
	}
}

// forget deletes the record of key from st as a failover to a replica that
// never received the claim does (and, with other set, lets another attempt
// claim the key afresh at fence 1, as the retry that follows it does).
func forget(t *testing.T, st *memstore.Store, key string, other bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Resolve(ctx, idem.ResolveParams{Key: key, From: []idem.State{idem.StateInProgress}, Release: true, Now: time.Now()}); err != nil {
		t.Fatalf("forgetting %q: %v", key, err)
	}
	if other {
		now := time.Now().UTC().Truncate(time.Microsecond)
		if _, err := st.Claim(ctx, idem.ClaimParams{Key: key, AttemptID: "the-retry", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLostClaimWrittenBack: the record of a running effect vanishes (the
// store went back in time); the outcome write finds no record, says the
// store lost the claim — never "fenced" — and writes the outcome back, so
// the next retry replays it instead of running the effect again.
func TestLostClaimWrittenBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     func(st *memstore.Store) idem.Handler
		state idem.State
	}{
		{"succeeded", func(st *memstore.Store) idem.Handler {
			return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				forget(t, st, string(a.Key), false)
				return []byte("charged"), nil
			}
		}, idem.StateSucceeded},
		{"failed", func(st *memstore.Store) idem.Handler {
			return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				forget(t, st, string(a.Key), false)
				return nil, errors.New("declined")
			}
		}, idem.StateFailed},
		{"unknown", func(st *memstore.Store) idem.Handler {
			return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				forget(t, st, string(a.Key), false)
				return nil, idem.Unknown(errors.New("provider silent"))
			}
		}, idem.StateUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			obs := &lostClaimObserver{}
			var logs bytes.Buffer
			e := newEngine(t, st, idem.Config{Observer: obs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ctx := context.Background()
			_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, tc.h(st))
			if errors.Is(err, idem.ErrFenced) {
				t.Fatalf("a lost claim reported as fenced: %v", err)
			}
			if len(obs.lost) != 1 {
				t.Fatalf("EventLostClaim reported %d times, want 1", len(obs.lost))
			}
			var lerr *idem.LostClaimError
			if !errors.As(obs.lost[0].Err, &lerr) || !lerr.WrittenBack || lerr.Found != nil {
				t.Fatalf("event error = %#v, want a LostClaimError written back", obs.lost[0].Err)
			}
			if !strings.Contains(logs.String(), "LOST A CLAIM") || strings.Contains(logs.String(), "fenced") {
				t.Fatalf("log does not say the store lost the claim:\n%s", logs.String())
			}
			rec, err := st.Get(ctx, "", "k")
			if err != nil || rec.State != tc.state {
				t.Fatalf("record after write-back = %+v, %v; want %s", rec, err, tc.state)
			}
			ran := false
			_, _ = e.DoBytes(ctx, idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
				ran = true
				return []byte("again"), nil
			})
			if ran {
				t.Fatal("the retry ran the effect again after the outcome was written back")
			}
		})
	}
}

// TestLostClaimSucceededAnswersTheCaller: a written-back success is the
// caller's answer, with no error, and the call's outcome says lost_claim.
func TestLostClaimSucceededAnswersTheCaller(t *testing.T) {
	st := memstore.New()
	obs := &lostClaimObserver{}
	e := newEngine(t, st, idem.Config{Observer: obs})
	res, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		forget(t, st, string(a.Key), false)
		return []byte("charged"), nil
	})
	if err != nil || string(res.Value) != "charged" || res.State != idem.StateSucceeded {
		t.Fatalf("DoBytes = %+v, %v", res, err)
	}
	if got := obs.outs[len(obs.outs)-1]; got != idem.OutcomeLostClaim {
		t.Fatalf("outcome %q, want %q", got, idem.OutcomeLostClaim)
	}
}

// TestLostClaimHeldByAnother: after the failover a retry claimed the key
// afresh (fence 1, another attempt) and is running the effect again. The
// first attempt's outcome write says so with ErrStoreLostClaim, writes
// nothing over the retry's claim, and is counted.
func TestLostClaimHeldByAnother(t *testing.T) {
	st := memstore.New()
	obs := &lostClaimObserver{}
	e := newEngine(t, st, idem.Config{Observer: obs})
	ctx := context.Background()
	_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		forget(t, st, string(a.Key), true)
		return []byte("charged"), nil
	})
	var lerr *idem.LostClaimError
	if !errors.Is(err, idem.ErrStoreLostClaim) || !errors.As(err, &lerr) || errors.Is(err, idem.ErrFenced) {
		t.Fatalf("err = %v, want ErrStoreLostClaim and not ErrFenced", err)
	}
	if lerr.WrittenBack || lerr.Found == nil || lerr.Found.AttemptID != "the-retry" {
		t.Fatalf("LostClaimError = %+v", lerr)
	}
	if len(obs.lost) != 1 {
		t.Fatalf("EventLostClaim reported %d times, want 1", len(obs.lost))
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.AttemptID != "the-retry" || rec.State != idem.StateInProgress {
		t.Fatalf("the retry's claim was overwritten: %+v, %v", rec, err)
	}
}

// TestFencedIsNotALostClaim: a record moved on by the rules (an operator
// decided it, so its fence grew) is fenced, not a lost claim, and counts
// nothing.
func TestFencedIsNotALostClaim(t *testing.T) {
	st := memstore.New()
	obs := &lostClaimObserver{}
	e := newEngine(t, st, idem.Config{Observer: obs})
	ctx := context.Background()
	_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		if _, err := st.Finish(ctx, idem.FinishParams{Key: "k", Fence: a.Fence, AttemptID: a.ID, State: idem.StateUnknown, CompletedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("declined"), Actor: "test", Reason: "decided"}); err != nil {
			t.Fatal(err)
		}
		return []byte("late"), nil
	})
	if !errors.Is(err, idem.ErrFenced) || errors.Is(err, idem.ErrStoreLostClaim) {
		t.Fatalf("err = %v, want ErrFenced", err)
	}
	if len(obs.lost) != 0 {
		t.Fatalf("a fenced write counted as a lost claim")
	}
}
