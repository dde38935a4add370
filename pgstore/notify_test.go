package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// wait bounds how long a test waits for a notification that must come; it
// is a failure deadline, not a timing assertion.
const wait = 20 * time.Second

func subscribe(t *testing.T, s *pgstore.Store, key string) (<-chan struct{}, func()) {
	t.Helper()
	ch, cancel, err := s.Subscribe(context.Background(), "tenant-1", key)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", key, err)
	}
	t.Cleanup(cancel)
	return ch, cancel
}

func mustReceive(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("no notification for %s within %s", what, wait)
	}
}

func mustBeEmpty(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected notification: %s", what)
	default:
	}
}

// drain removes a pending (possibly spurious) signal.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestNotify checks delivery by key. Notifications arrive on one connection
// in commit order, so once the signal for a later write has arrived, any
// signal for an earlier one has been dispatched too: that is how the test
// shows what was *not* delivered without sleeping.
func TestNotify(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	// Waiters subscribe to records in flight, as the engine does.
	ca := mustClaim(t, s, claimParams("a", "x", t0))
	cb := mustClaim(t, s, claimParams("b", "x", t0))
	cc := mustClaim(t, s, claimParams("c", "x", t0))
	a, _ := subscribe(t, s, "a")
	c, _ := subscribe(t, s, "c")
	subscribe(t, s, "b") // flags b, so its outcome notifies too
	drain(a)
	drain(c)

	mustFinish(t, s, succeed(cb, "ok", t0, time.Hour))
	mustFinish(t, s, succeed(cc, "ok", t0, time.Hour))
	mustReceive(t, c, "finish of c")
	mustBeEmpty(t, a, "a woken by the finish of b")

	// A rolled-back transaction notifies nobody.
	tx, err := sharedPool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustFinish(t, s.WithTx(tx), succeed(ca, "ok", t0, time.Hour))
	tx.Rollback(ctx)
	if err := s.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "c", Fence: 1, AttemptID: "x"}); !errors.Is(err, idem.ErrFenced) {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, idem.ResolveParams{Scope: "tenant-1", Key: "c", From: []idem.State{idem.StateSucceeded}, Release: true}); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, c, "resolve of c")
	mustBeEmpty(t, a, "a woken by a rolled-back finish")

	// Release wakes, and a cancelled subscription does not.
	a2, cancel2 := subscribe(t, s, "a")
	cancel2()
	cancel2() // idempotent
	drain(a2)
	if err := s.Release(ctx, idem.ReleaseParams{Scope: "tenant-1", Key: "a", Fence: 1, AttemptID: "x"}); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, a, "release of a")
	mustBeEmpty(t, a2, "a cancelled subscription")
}

// TestNotifyReconnect kills the listener's backend: the listener must
// reconnect, wake every subscriber (notifications sent while it was down are
// lost), and deliver later notifications.
func TestNotifyReconnect(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	c := mustClaim(t, s, claimParams("k", "x", t0))
	ch, _ := subscribe(t, s, "k")
	drain(ch)
	pid := s.ListenerPID()
	if _, err := sharedPool().Exec(ctx, "SELECT pg_terminate_backend($1)", int32(pid)); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, ch, "the wake-up after reconnecting")
	// A new subscription returns only once the listener listens again.
	ch2, _ := subscribe(t, s, "k")
	if s.ListenerPID() == pid {
		t.Fatal("listener still reports the terminated backend")
	}
	mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
	mustReceive(t, ch2, "finish after reconnect")
}

func TestNotifyDisabled(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{DisableNotify: true})
	if _, _, err := s.Subscribe(context.Background(), "tenant-1", "k"); !errors.Is(err, pgstore.ErrNotifyDisabled) {
		t.Fatalf("Subscribe with notifications disabled: err = %v", err)
	}
	// Writes must not reference pg_notify parameters they were not given.
	c := mustClaim(t, s, claimParams("k", "x", t0))
	mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
}

func TestSubscribeContextBoundsTheWait(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Subscribe(ctx, "tenant-1", "k"); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe with a cancelled context: err = %v", err)
	}
}
