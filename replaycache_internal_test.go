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
