package idem

import (
	"fmt"
	"testing"
	"time"
)

func TestReplayCacheBoundedInBytes(t *testing.T) {
	c := newReplayCache(ReplayCacheConfig{MaxBytes: 64 << 10}, nil)
	exp := time.Now().Add(time.Hour)
	big := make([]byte, 1000)
	for i := 0; i < 10000; i++ {
		k := fmt.Sprint("k", i)
		c.put("", k, &Record{Key: k, State: StateSucceeded, Result: big, ExpiresAt: exp})
		if c.bytes() > 64<<10 {
			t.Fatalf("after %d puts the cache holds %d bytes, over its 64 KiB bound", i+1, c.bytes())
		}
	}
	if _, ok := c.get("", "k9999", time.Now()); !ok {
		t.Fatal("the most recent entry was evicted")
	}
	if _, ok := c.get("", "k0", time.Now()); ok {
		t.Fatal("the oldest entry survived")
	}
	c.put("", "running", &Record{Key: "running", State: StateInProgress})
	c.put("", "unknown", &Record{Key: "unknown", State: StateUnknown})
	for _, k := range []string{"running", "unknown"} {
		if _, ok := c.get("", k, time.Now()); ok {
			t.Fatalf("%s record was cached", k)
		}
	}
}

// localStub says it is process-local; newReplayCache asks nothing else.
type localStub struct{ Store }

func (localStub) ProcessLocal() bool { return true }

// The defaults: 32 MiB for every store; an entry trusted for 1s over a
// shared store (the bound on how long another process's forced correction
// goes unseen here) and 10s over a process-local one (exact anyway).
func TestReplayCacheDefaultBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store Store
		age   time.Duration
	}{
		{"shared", nil, time.Second},
		{"process-local", localStub{}, 10 * time.Second},
	} {
		c := newReplayCache(ReplayCacheConfig{}, tc.store)
		if c == nil {
			t.Fatalf("%s: no cache by default", tc.name)
		}
		if c.max != 32<<20 || c.maxAge != tc.age {
			t.Errorf("%s: default cache of %d bytes trusting entries for %s, want %d bytes and %s", tc.name, c.max, c.maxAge, 32<<20, tc.age)
		}
	}
	if c := newReplayCache(ReplayCacheConfig{MaxBytes: -1}, nil); c != nil {
		t.Error("MaxBytes -1 left the cache on")
	}
}

// An entry older than MaxAge is not replayed: the store is read again, so
// a change made by another process is seen within MaxAge. Entries are
// dated by the wall clock, so the test dates them in the past rather than
// waiting.
func TestReplayCacheEntryOlderThanMaxAgeIsDropped(t *testing.T) {
	c := newReplayCache(ReplayCacheConfig{}, nil) // shared: 1s
	now := time.Now()
	rec := func(k string) *Record {
		return &Record{Key: k, State: StateSucceeded, Result: []byte("v"), ExpiresAt: now.Add(time.Hour)}
	}
	for _, tc := range []struct {
		key    string
		cached time.Time
		hit    bool
	}{
		{"fresh", now.Add(-500 * time.Millisecond), true},
		{"stale", now.Add(-1500 * time.Millisecond), false},
	} {
		c.putOwned("", tc.key, rec(tc.key), tc.cached)
		if _, ok := c.get("", tc.key, now); ok != tc.hit {
			t.Errorf("entry cached %s ago: hit %v, want %v", now.Sub(tc.cached), ok, tc.hit)
		}
	}
	if _, ok := c.get("", "stale", now); ok {
		t.Error("a stale entry was kept after its miss")
	}
}
