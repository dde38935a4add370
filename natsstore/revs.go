package natsstore

import (
	"sync"
	"time"
)

// maxRevs bounds the revisions a store remembers: a claim whose outcome
// never comes (its process died) leaves its entry behind until then.
const maxRevs = 1 << 16

// revCache remembers, per KV key, the revision at which this store wrote
// or found a claim (fence and attempt), so that the claim's outcome can be
// written conditional on it without reading the record first. A
// remembered revision is only ever a guess: the write checks it, and a
// revision that moved on sends Finish back to reading.
type revCache struct {
	mu sync.Mutex
	m  map[string]revEntry
}

type revEntry struct {
	rev     uint64
	fence   int64
	attempt string
	lease   time.Time // the record's LeaseUntil at rev: the claim's, or the last heartbeat's
}

func (c *revCache) put(k string, rev uint64, fence int64, attempt string, lease time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]revEntry)
	}
	if len(c.m) >= maxRevs {
		if _, ok := c.m[k]; !ok {
			return
		}
	}
	c.m[k] = revEntry{rev, fence, attempt, lease}
}

// take removes k's entry and returns its revision and lease if it is
// (fence, attempt)'s.
func (c *revCache) take(k string, fence int64, attempt string) (uint64, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	delete(c.m, k)
	return e.rev, e.lease, ok && e.fence == fence && e.attempt == attempt
}

func (c *revCache) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
