package idem_test

// Tests for engine guards that mutations in testdata/mutations removed
// without any test failing (see docs/testing.md): each fails, every time,
// with its guard gone. None depends on scheduling: where time matters, the
// two behaviours are seconds apart and the test waits for neither.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// TestFencedOutcomeIsNeverSpooled: an operator decides the record while
// its effect runs (the fence grows); the effect's own outcome write is
// then refused as fenced. That refusal is the rules at work, not a store
// outage: the outcome must not be spooled (it would be answered to
// duplicates from the spool, and re-applied later), and the caller is told
// fenced, not success.
func TestFencedOutcomeIsNeverSpooled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sp := openSpool(t, t.TempDir())
	st := memstore.New()
	e := newEngine(t, st, spoolConfig(sp))
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 5000"))}
	_, err := e.DoBytes(ctx, req, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		if _, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("declined"),
			Force: true, Actor: "ops", Reason: "the provider declined it"}); err != nil {
			t.Error(err)
		}
		return []byte("ch_late"), nil
	})
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("DoBytes after the record was decided under it = %v; want ErrFenced", err)
	}
	if n := sp.Len(); n != 0 {
		t.Fatalf("the spool holds %d outcomes; a fenced write must never be spooled", n)
	}
	ran := false
	_, err = e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	var fe *idem.FailureError
	if !errors.As(err, &fe) || fe.Message != "declined" || !fe.Replayed || ran {
		t.Fatalf("duplicate = %v (ran %v); want the operator's decision replayed", err, ran)
	}
	if n, err := e.ApplySpool(ctx); n != 0 || err != nil {
		t.Fatalf("ApplySpool = %d, %v; want nothing to apply", n, err)
	}
	if rec, err := st.Get(ctx, "", "k"); err != nil || rec.State != idem.StateFailed || string(rec.Result) != "declined" {
		t.Fatalf("record = %+v, %v; want the operator's decision", rec, err)
	}
}

// finishDownStore refuses every outcome write (Finish) while down is set,
// as an unreachable store would, while releases still go through: a store
// that fails one kind of write.
type finishDownStore struct {
	*memstore.Store
	down     atomic.Bool
	finishes atomic.Int64
}

func (s *finishDownStore) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if s.down.Load() {
		s.finishes.Add(1)
		return nil, errStoreDown
	}
	return s.Store.Finish(ctx, p)
}

// TestFailedOutcomeWriteKeepsTheClaim: the effect ran and its outcome
// could not be written for the whole FinishTimeout. The claim must stay
// (in progress, unknown after its lease), so that no retry runs the effect
// again: deleting it, as a release does, would tell the next retry that
// nothing happened.
func TestFailedOutcomeWriteKeepsTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock()
	st := &finishDownStore{Store: memstore.New()}
	st.down.Store(true)
	e := newEngine(t, st, idem.Config{Clock: clock.Now, Lease: time.Minute, FinishTimeout: 50 * time.Millisecond})
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 5000"))}
	var runs atomic.Int64
	charge := func(context.Context, *idem.Attempt) ([]byte, error) { runs.Add(1); return []byte("ch_1"), nil }
	if _, err := e.DoBytes(ctx, req, charge); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes with outcome writes refused = %v; want ErrStoreUnavailable", err)
	}
	if st.finishes.Load() < 2 {
		t.Fatalf("%d outcome writes tried; want the write retried", st.finishes.Load())
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.State != idem.StateInProgress {
		t.Fatalf("record after the outcome write failed = %+v, %v; want the claim kept, in progress", rec, err)
	}
	st.down.Store(false)           // the store is back
	clock.Advance(2 * time.Minute) // past the lease
	if _, err := e.DoBytes(ctx, req, charge); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("retry past the lease = %v; want ErrUnknownOutcome", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the effect ran %d times; want once", n)
	}
}

// lostResolveStore applies the first Resolve and loses its answer, as a
// network store can.
type lostResolveStore struct {
	*memstore.Store
	lost atomic.Bool
}

func (s *lostResolveStore) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	rec, err := s.Store.Resolve(ctx, p)
	if err == nil && s.lost.CompareAndSwap(false, true) {
		return nil, errStoreDown
	}
	return rec, err
}

// TestResolveRetriedAfterLostAnswer: a resolution whose answer was lost is
// retried; the retry finds the record decided by its own attempt id and
// reports success with it, not "fenced: the record is not unknown".
func TestResolveRetriedAfterLostAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &lostResolveStore{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{})
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, idem.Unknown(errors.New("provider timed out"))
	}); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	rec, err := e.Resolve(ctx, "", "k", idem.Resolution{As: idem.StateSucceeded, Result: []byte("ch_1"), Actor: "ops", Reason: "provider says applied"})
	if err != nil || rec == nil || rec.State != idem.StateSucceeded || string(rec.Result) != "ch_1" {
		t.Fatalf("Resolve with its first answer lost = %+v, %v; want the resolution it made", rec, err)
	}
	if !st.lost.Load() {
		t.Fatal("the store lost no answer: the test did not test anything")
	}
}

// TestWaiterWakesAtTheHoldersLeaseExpiry: a duplicate waits on an attempt
// whose holder died. The store notifies nothing (no one writes), and
// polling is set to an hour: the only thing that can wake the waiter
// before its 5s bound is the wake-up its watch sets at the holder's lease
// expiry (200ms). Woken there, it is told unknown; without that wake-up
// it would be told "in flight" at its bound, and learn of unknown only on
// a later retry.
func TestWaiterWakesAtTheHoldersLeaseExpiry(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	fp := idem.NewFingerprint([]byte("charge 100"))
	now := time.Now()
	if _, err := st.Claim(context.Background(), idem.ClaimParams{Key: "k", Fingerprint: fp, AttemptID: "dead",
		Now: now, LeaseUntil: now.Add(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, st, idem.Config{PollMin: time.Hour, PollMax: time.Hour})
	ran := false
	_, err := e.DoBytes(context.Background(), idem.Request{Key: "k", Fingerprint: fp,
		Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: 5 * time.Second}},
		func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrUnknownOutcome) || ran {
		t.Fatalf("waiting on a holder whose lease ran out: %v (effect ran: %v); want ErrUnknownOutcome, learnt at the lease's end", err, ran)
	}
}

// TestHeldKeyPastItsLeaseAsksTheStore: this engine runs the effect of a
// key, and its lease has passed on the engine's clock (the clock jumped;
// no heartbeat extended it). A duplicate must not be treated as in flight
// on the strength of the local hold: the store is asked, finds the lease
// expired and reports the outcome unknown.
func TestHeldKeyPastItsLeaseAsksTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock()
	e := newEngine(t, memstore.New(), idem.Config{Clock: clock.Now, Lease: time.Hour, InFlight: idem.InFlightReject})
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 100"))}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("ch_1"), nil
		})
		done <- err
	}()
	<-started
	clock.Advance(2 * time.Hour)
	_, err := e.DoBytes(ctx, req, ok("x"))
	close(release)
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("duplicate of a held key past its lease = %v; want ErrUnknownOutcome from the store", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the holder's late outcome = %v; want it accepted (the truth arriving late)", err)
	}
}

// TestRejectPolicyAcrossEngines: with the reject policy, a duplicate
// whose key another engine holds (another process, one store) is refused
// at once with ErrInFlight; it does not wait for the holder. The holder is
// released only after the duplicate has its answer, so a duplicate that
// waited instead would wait until its context's end.
func TestRejectPolicyAcrossEngines(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	holder := newEngine(t, st, idem.Config{})
	dup := newEngine(t, st, idem.Config{InFlight: idem.InFlightReject, Wait: time.Hour})
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 100"))}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := holder.DoBytes(context.Background(), req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("ch_1"), nil
		})
		done <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dup.DoBytes(ctx, req, ok("x"))
	close(release)
	var ife *idem.InFlightError
	if !errors.As(err, &ife) {
		t.Fatalf("duplicate from another engine under the reject policy = %v; want an *InFlightError at once", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// failingClaimStore fails every Claim without applying it, as a store
// that stopped answering would.
type failingClaimStore struct{ *memstore.Store }

func (s failingClaimStore) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	return idem.ClaimResult{}, errStoreDown
}

// TestLostClaimAnswerNeverReleasesAnothersClaim: a claim fails without an
// answer; the engine cleans up after it by reading the record and
// releasing it if its own claim landed. Here the key is held by another
// attempt, whose effect may be running: the clean-up must leave it alone,
// or the next retry would run the effect a second time.
func TestLostClaimAnswerNeverReleasesAnothersClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	now := time.Now()
	if _, err := mem.Claim(ctx, idem.ClaimParams{Key: "k", AttemptID: "other", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, failingClaimStore{mem}, idem.Config{})
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes with claims failing = %v; want ErrStoreUnavailable", err)
	}
	rec, err := mem.Get(ctx, "", "k")
	if err != nil || rec.AttemptID != "other" || rec.State != idem.StateInProgress {
		t.Fatalf("record after the failed claim's clean-up = %+v, %v; want the other attempt's claim untouched", rec, err)
	}
}

// racingWriteBackStore lets another attempt claim the key just before the
// engine's write-back of a lost claim's outcome claims it (the claim of
// the original attempt id, made once armed).
type racingWriteBackStore struct {
	*memstore.Store
	armed atomic.Bool
}

func (s *racingWriteBackStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if s.armed.CompareAndSwap(true, false) {
		if _, err := s.Store.Claim(ctx, idem.ClaimParams{Scope: p.Scope, Key: p.Key, AttemptID: "the-retry",
			Now: p.Now, LeaseUntil: p.Now.Add(time.Hour)}); err != nil {
			return idem.ClaimResult{}, err
		}
	}
	return s.Store.Claim(ctx, p)
}

// TestLostClaimWriteBackLeavesANewClaimAlone: the store lost the claim of
// a running effect (the record vanished), and between the engine's read
// that found the key free and its write-back of the known outcome, a
// retry claimed the key afresh. The key is the retry's now: the write-back
// must not record this attempt's outcome over the retry's claim.
func TestLostClaimWriteBackLeavesANewClaimAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &racingWriteBackStore{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{})
	_, err := e.DoBytes(ctx, idem.Request{Key: "k"}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		forget(t, st.Store, string(a.Key), false)
		st.armed.Store(true)
		return []byte("charged"), nil
	})
	var lerr *idem.LostClaimError
	if !errors.As(err, &lerr) || lerr.WrittenBack {
		t.Fatalf("DoBytes = %v; want a LostClaimError, not written back", err)
	}
	rec, err := st.Get(ctx, "", "k")
	if err != nil || rec.AttemptID != "the-retry" || rec.State != idem.StateInProgress {
		t.Fatalf("record = %+v, %v; want the retry's claim, in progress, untouched", rec, err)
	}
}

// agingStore is the waiter's view of a store shared with a holder: its
// first read of the record in progress is signalled (the waiter's watch
// is up), and a read that finds the outcome recorded moves the shared
// clock past the outcome's expiry before answering, so that the waiter
// decides on an outcome that has expired since.
type agingStore struct {
	*memstore.Store
	clock    *storetest.Clock
	watching chan struct{}
	once     atomic.Bool
}

func (s *agingStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	rec, err := s.Store.Get(ctx, scope, key)
	switch {
	case err == nil && rec.State == idem.StateInProgress && s.once.CompareAndSwap(false, true):
		close(s.watching)
	case err == nil && rec.State.Terminal():
		s.clock.Advance(2 * time.Hour)
	}
	return rec, err
}

// TestWaiterDoesNotReplayAnExpiredOutcome: a duplicate waits for the
// attempt in flight; when it learns the outcome, that outcome has passed
// its retention. An expired outcome is not replayed (past the TTL a key is
// a new intent): the waiter claims the key and runs its own request.
func TestWaiterDoesNotReplayAnExpiredOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock()
	mem := memstore.New()
	cfg := idem.Config{Clock: clock.Now, TTL: time.Hour, Lease: 10 * time.Hour, ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}
	holder := newEngine(t, mem, cfg)
	st := &agingStore{Store: mem, clock: clock, watching: make(chan struct{})}
	waiter := newEngine(t, st, cfg)
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("charge 100")), Policy: idem.Policy{InFlight: idem.InFlightWait, Wait: time.Minute}}
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		_, err := holder.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(started)
			<-release
			return []byte("first"), nil
		})
		held <- err
	}()
	<-started
	type answer struct {
		res idem.Result
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		res, err := waiter.DoBytes(ctx, req, ok("second"))
		waited <- answer{res, err}
	}()
	<-st.watching
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	a := <-waited
	if a.err != nil || a.res.Replayed || string(a.res.Value) != "second" {
		t.Fatalf("waiter = %+v, %v; want its own request run (the outcome it waited for had expired), not a replay", a.res, a.err)
	}
}

// TestRawFingerprintCoversMethodAndRoute: a body that is not JSON is
// hashed with the request's method and route, so the same bytes sent to
// another route, or with another method, are another request (a mismatch
// under one key), never a replay of the first.
func TestRawFingerprintCoversMethodAndRoute(t *testing.T) {
	t.Parallel()
	body := []byte("amount=5000&currency=EUR")
	base, _, err := idem.FingerprintBody("POST", "/v1/charges", body, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"POST", "/v1/refunds"}, {"PUT", "/v1/charges"}} {
		f, _, err := idem.FingerprintBody(r[0], r[1], body, false)
		if err != nil || f == base {
			t.Errorf("%s %s with the same raw body: fingerprint %s, %v; want one of its own", r[0], r[1], f, err)
		}
	}
}
