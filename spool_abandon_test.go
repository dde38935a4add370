package idem_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// pausedStore is a store that is paused as a SIGSTOPped Redis is: while
// paused every call fails (the caller's timeout), but a claim sent in the
// meantime is not lost — it is queued and lands when the store resumes
// (with landNow) or later (with the test's land).
type pausedStore struct {
	*memstore.Store
	paused atomic.Bool
	mu     sync.Mutex
	queued []idem.ClaimParams
}

var errPaused = errors.New("i/o timeout: the store does not answer")

func (s *pausedStore) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if s.paused.Load() {
		s.mu.Lock()
		s.queued = append(s.queued, p)
		s.mu.Unlock()
		return idem.ClaimResult{}, errPaused
	}
	return s.Store.Claim(ctx, p)
}

func (s *pausedStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if s.paused.Load() {
		return nil, errPaused
	}
	return s.Store.Get(ctx, scope, key)
}

func (s *pausedStore) Release(ctx context.Context, p idem.ReleaseParams) error {
	if s.paused.Load() {
		return errPaused
	}
	return s.Store.Release(ctx, p)
}

// land executes the claims queued while the store was paused, as the
// resumed store does.
func (s *pausedStore) land(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	q := s.queued
	s.queued = nil
	s.mu.Unlock()
	for _, p := range q {
		if _, err := s.Store.Claim(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbandonedClaimReleasedFromSpool: a claim sent while the store is
// paused gets "not run" at once; the claim lands when the store resumes.
// The engine kept the abandoned attempt in its spool and releases that
// claim once the store answers — past FinishTimeout — so the client's
// retry runs the effect once instead of meeting an in-progress claim
// nobody owns (409, then unknown after its lease).
func TestAbandonedClaimReleasedFromSpool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sp := openSpool(t, dir)
	st := &pausedStore{Store: memstore.New()}
	e := newEngine(t, st, spoolConfig(sp))
	st.paused.Store(true)
	ran := 0
	h := func(context.Context, *idem.Attempt) ([]byte, error) { ran++; return []byte("ch_1"), nil }
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, h); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes on a paused store = %v; want ErrStoreUnavailable", err)
	}
	if ran != 0 || sp.Len() != 1 {
		t.Fatalf("ran %d, spool holds %d; want 0 and the abandoned claim", ran, sp.Len())
	}
	time.Sleep(300 * time.Millisecond) // longer than FinishTimeout: the engine has not given up
	st.paused.Store(false)
	st.land(t)
	if rec, err := st.Get(ctx, "", "k"); err != nil || rec.State != idem.StateInProgress {
		t.Fatalf("the claim did not land: %+v, %v", rec, err)
	}
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v; want the abandoned claim settled", n, err)
	}
	if _, err := st.Get(ctx, "", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("the abandoned claim is still there: %v", err)
	}
	r, err := e.DoBytes(ctx, idem.Request{Key: "k"}, h)
	if err != nil || r.Replayed || ran != 1 {
		t.Fatalf("retry = %+v, %v, ran %d; want the effect run once", r, err, ran)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.outcome.json")); len(files) != 0 {
		t.Fatalf("spool files left: %v", files)
	}
}

// TestAbandonedClaimThatLandsLate: the store answers again before the
// queued claim lands. The absent record is looked for again until the
// claim's lease passes; the claim that lands meanwhile is released, and
// a restarted engine opening the spool does it as well.
func TestAbandonedClaimThatLandsLate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := &pausedStore{Store: memstore.New()}
	e := newEngine(t, st, spoolConfig(openSpool(t, dir)))
	st.paused.Store(true)
	if _, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v")); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("DoBytes = %v", err)
	}
	st.paused.Store(false)
	if n, err := e.ApplySpool(ctx); n != 0 || err != nil {
		t.Fatalf("ApplySpool before the claim landed = %d, %v; want it kept", n, err)
	}
	e.Close()
	// A restart: a new engine on the same spool.
	sp := openSpool(t, dir)
	if sp.Len() != 1 {
		t.Fatalf("the reopened spool holds %d entries, want the abandoned claim", sp.Len())
	}
	e2 := newEngine(t, st, spoolConfig(sp))
	st.land(t)
	if n, err := e2.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool after the claim landed = %d, %v", n, err)
	}
	if _, err := st.Get(ctx, "", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("the late claim was not released: %v", err)
	}
}

// TestAbandonedClaimNeverLanding: a claim that never lands is dropped
// from the spool once its lease has passed.
func TestAbandonedClaimNeverLanding(t *testing.T) {
	ctx := context.Background()
	st := &pausedStore{Store: memstore.New()}
	sp := openSpool(t, t.TempDir())
	cfg := spoolConfig(sp)
	cfg.Lease = 200 * time.Millisecond
	e := newEngine(t, st, cfg)
	st.paused.Store(true)
	_, _ = e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v"))
	st.paused.Store(false)
	st.mu.Lock()
	st.queued = nil // lost for good
	st.mu.Unlock()
	time.Sleep(250 * time.Millisecond)
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil || sp.Len() != 0 {
		t.Fatalf("ApplySpool past the lease = %d, %v (spool %d); want it dropped", n, err, sp.Len())
	}
}

// TestAbandonedClaimOfAnotherAttempt: when another attempt holds the key
// by the time the store answers, the abandoned entry leaves the spool and
// the other attempt's claim is untouched.
func TestAbandonedClaimOfAnotherAttempt(t *testing.T) {
	ctx := context.Background()
	st := &pausedStore{Store: memstore.New()}
	sp := openSpool(t, t.TempDir())
	e := newEngine(t, st, spoolConfig(sp))
	st.paused.Store(true)
	_, _ = e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v"))
	st.paused.Store(false)
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.Store.Claim(ctx, idem.ClaimParams{Key: "k", AttemptID: "other", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("ApplySpool = %d, %v", n, err)
	}
	if rec, err := st.Get(ctx, "", "k"); err != nil || rec.AttemptID != "other" {
		t.Fatalf("another attempt's claim was touched: %+v, %v", rec, err)
	}
}

// TestSpoolBelongsToOneStore: a directory bound to one store is refused
// for another, naming both; outcomes another store's engine spooled are
// neither applied nor deleted by this one.
func TestSpoolBelongsToOneStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	spA, err := idem.OpenSpoolFor(dir, "postgres://db-a/idem")
	if err != nil {
		t.Fatal(err)
	}
	stA := &downStore{Store: memstore.New()}
	eA := newEngine(t, stA, spoolConfig(spA))
	stA.down.Store(true)
	if _, err := eA.DoBytes(ctx, idem.Request{Key: "k"}, ok("201")); err != nil {
		t.Fatalf("DoBytes with the store down = %v; want the outcome spooled", err)
	}
	_, err = idem.OpenSpoolFor(dir, "postgres://db-b/idem")
	var inUse *idem.SpoolInUseError
	if !errors.Is(err, idem.ErrSpoolInUse) || !errors.As(err, &inUse) || inUse.Owner != "postgres://db-a/idem" || inUse.Store != "postgres://db-b/idem" {
		t.Fatalf("OpenSpoolFor another store = %v; want a SpoolInUseError naming both", err)
	}
	// Store B's engine with an unbound spool on the same directory (as a
	// build before the binding would) must still leave A's outcome alone
	// once the directory is bound: a spool bound to B elsewhere, with A's
	// file copied in, does not apply it.
	dirB := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(dir, "*.outcome.json"))
	if len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	b, _ := os.ReadFile(files[0])
	if _, err := idem.OpenSpoolFor(dirB, "postgres://db-b/idem"); err != nil { // binds dirB to B
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, filepath.Base(files[0])), b, 0o600); err != nil {
		t.Fatal(err)
	}
	spB, err := idem.OpenSpoolFor(dirB, "postgres://db-b/idem")
	if err != nil {
		t.Fatal(err)
	}
	if spB.Len() != 0 || len(spB.Foreign()) != 1 {
		t.Fatalf("store B's spool loaded %d entries, %d foreign; want 0 and 1", spB.Len(), len(spB.Foreign()))
	}
	eB := newEngine(t, memstore.New(), spoolConfig(spB))
	if n, err := eB.ApplySpool(ctx); n != 0 || err != nil {
		t.Fatalf("store B applied %d: %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dirB, filepath.Base(files[0]))); err != nil {
		t.Fatalf("store B deleted store A's outcome: %v", err)
	}
	// Store A, back, applies its own.
	stA.down.Store(false)
	if n, err := eA.ApplySpool(ctx); n != 1 || err != nil {
		t.Fatalf("store A's ApplySpool = %d, %v", n, err)
	}
	if rec, err := stA.Get(ctx, "", "k"); err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("store A's record = %+v, %v", rec, err)
	}
}
