package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// claimCounter counts Claim calls; it hides ProcessLocal, so it behaves as
// a shared store.
type claimCounter struct {
	*memstore.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *claimCounter) ProcessLocal() bool { return false }

func TestReplayCache(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	fpA := idem.NewFingerprint([]byte("a"))
	st := &claimCounter{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{TTL: time.Hour, Clock: clock, ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, MaxAge: time.Hour, CacheRecorded: true}})
	req := idem.Request{Scope: "alice", Key: "k", Fingerprint: fpA}
	if _, err := e.DoBytes(ctx, req, ok("v")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		r, err := e.DoBytes(ctx, req, ok("x"))
		if err != nil || !r.Replayed || string(r.Value) != "v" {
			t.Fatalf("replay %d = %+v, %v", i, r, err)
		}
	}
	if n := st.claims.Load(); n != 1 {
		t.Fatalf("%d store claims for 1 first run + 100 replays, want 1: replays are not served from the cache", n)
	}
	// A different request with the same key is still a mismatch.
	if _, err := e.DoBytes(ctx, idem.Request{Scope: "alice", Key: "k", Fingerprint: idem.NewFingerprint([]byte("b"))}, ok("x")); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("cached mismatch = %v", err)
	}
	// Another scope never sees alice's entry.
	r, err := e.DoBytes(ctx, idem.Request{Scope: "bob", Key: "k", Fingerprint: fpA}, ok("bob"))
	if err != nil || r.Replayed || string(r.Value) != "bob" {
		t.Fatalf("bob = %+v, %v", r, err)
	}
	// A forced resolution through the engine is seen at once.
	if _, err := e.Resolve(ctx, "alice", "k", idem.Resolution{As: idem.StateFailed, Result: []byte("reversed"), Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DoBytes(ctx, req, ok("x")); !errors.Is(err, idem.ErrRecordedFailure) {
		t.Fatalf("after forced resolve = %v, want the new recorded failure", err)
	}
	// Expiry is respected.
	now = now.Add(2 * time.Hour)
	r, err = e.DoBytes(ctx, req, ok("new"))
	if err != nil || r.Replayed || string(r.Value) != "new" {
		t.Fatalf("after expiry = %+v, %v; want a new intent", r, err)
	}
}

func TestReplayCacheSkipsUndecidedRecords(t *testing.T) {
	ctx := context.Background()
	st := &claimCounter{Store: memstore.New()}
	e := newEngine(t, st, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20}})
	req := idem.Request{Key: "u"}
	_, _ = e.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, idem.Unknown(nil) })
	for i := 0; i < 3; i++ {
		if _, err := e.DoBytes(ctx, req, ok("x")); !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Fatal(err)
		}
	}
	if n := st.claims.Load(); n != 4 {
		t.Fatalf("%d claims, want 4: an unknown record must be read from the store every time", n)
	}
	// Resolving the unknown record elsewhere (the store directly) is seen.
	rec, _ := st.Get(ctx, "", "u")
	if _, err := st.Resolve(ctx, idem.ResolveParams{Key: "u", Fence: rec.Fence, To: idem.StateSucceeded, AttemptID: "op", Result: []byte("settled"), Now: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.DoBytes(ctx, req, ok("x")); err != nil || string(r.Value) != "settled" {
		t.Fatalf("after resolution = %+v, %v", r, err)
	}
}

// The cache is on by default over a shared store too, filled from the
// records replays read: the first replay reads the store, the ones after
// it (within MaxAge) do not. Turned off, every replay reads the store.
func TestReplayCacheDefaults(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		cfg    idem.ReplayCacheConfig
		claims int64
	}{
		{"default", idem.ReplayCacheConfig{}, 2},
		{"off", idem.ReplayCacheConfig{MaxBytes: -1}, 3},
		{"recorded outcomes cached", idem.ReplayCacheConfig{CacheRecorded: true}, 1},
	} {
		shared := &claimCounter{Store: memstore.New()}
		e := newEngine(t, shared, idem.Config{ReplayCache: tc.cfg})
		for i := 0; i < 3; i++ {
			r, err := e.DoBytes(ctx, idem.Request{Key: "k"}, ok("v"))
			if err != nil || r.Replayed != (i > 0) {
				t.Fatalf("%s: request %d = %+v, %v", tc.name, i, r, err)
			}
		}
		if n := shared.claims.Load(); n != tc.claims {
			t.Errorf("shared store, cache %s: %d claims for 1 first run + 2 replays, want %d", tc.name, n, tc.claims)
		}
	}
}

// localCounter is claimCounter for a process-local store.
type localCounter struct{ claimCounter }

func (c *localCounter) ProcessLocal() bool { return true }

// With a process-local store the cache is on by default and fills from the
// records replays read: the first-time path copies nothing into it, the
// first replay reads the store once, and the replays after it none.
// A shared store's cache fills the same way by default; with CacheRecorded
// it also takes each recorded outcome, so that even the first retry needs
// no round trip.
func TestReplayCacheFillsFromReplaysOnProcessLocalStores(t *testing.T) {
	ctx := context.Background()
	local := &localCounter{claimCounter{Store: memstore.New()}}
	e := newEngine(t, local, idem.Config{})
	req := idem.Request{Key: "k"}
	for i := 0; i < 10; i++ {
		if _, err := e.DoBytes(ctx, req, ok("v")); err != nil {
			t.Fatal(err)
		}
	}
	if n := local.claims.Load(); n != 2 {
		t.Fatalf("process-local store: %d claims for 1 first run + 9 replays, want 2 (the first run and the first replay)", n)
	}

	shared := &claimCounter{Store: memstore.New()}
	e = newEngine(t, shared, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: 1 << 20, CacheRecorded: true}})
	for i := 0; i < 10; i++ {
		if _, err := e.DoBytes(ctx, req, ok("v")); err != nil {
			t.Fatal(err)
		}
	}
	if n := shared.claims.Load(); n != 1 {
		t.Fatalf("shared store with a cache: %d claims for 1 first run + 9 replays, want 1", n)
	}
}
