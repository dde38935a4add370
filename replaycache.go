package idem

import (
	"container/list"
	"sync"
	"time"
)

// ReplayCacheConfig configures the in-process cache of terminal records.
//
// A succeeded or failed record never changes until it expires — with one
// exception: an operator's forced resolution (Resolve with Force, `idem
// resolve --force`). A resolution made through this engine invalidates its
// entry at once. One made by another process cannot reach this cache, so for
// a store shared between processes the cache trusts an entry for at most
// MaxAge: that is the bound on how long a forced correction can go unseen
// here. For process-local stores (see [ProcessLocal]) the cache is exact.
type ReplayCacheConfig struct {
	// MaxBytes bounds the memory the cache uses (records' results, intents
	// and keys). 0 takes the default: 32 MiB for process-local stores, off
	// for shared ones. Negative disables the cache.
	MaxBytes int
	// MaxAge bounds how long an entry is trusted. Defaults to 10s.
	MaxAge time.Duration
}

// ProcessLocal is implemented by stores whose records no other process can
// change (the memory store). The replay cache is on by default for them.
type ProcessLocal interface {
	ProcessLocal() bool
}

const replayCacheOverhead = 160 // bytes per entry beyond its variable parts

type cacheEntry struct {
	k      string
	rec    Record
	cached time.Time
	size   int
}

// replayCache is an LRU of terminal records bounded in bytes.
type replayCache struct {
	mu     sync.Mutex
	max    int
	maxAge time.Duration
	size   int
	ll     *list.List
	m      map[string]*list.Element
}

func newReplayCache(cfg ReplayCacheConfig, store Store) *replayCache {
	max := cfg.MaxBytes
	if max == 0 {
		if pl, ok := store.(ProcessLocal); ok && pl.ProcessLocal() {
			max = 32 << 20
		}
	}
	if max <= 0 {
		return nil
	}
	age := cfg.MaxAge
	if age <= 0 {
		age = 10 * time.Second
	}
	return &replayCache{max: max, maxAge: age, ll: list.New(), m: make(map[string]*list.Element)}
}

// get returns the cached terminal record for k if it is still trustworthy
// at now (not expired, not older than MaxAge).
func (c *replayCache) get(k string, now time.Time) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[k]
	if el == nil {
		return Record{}, false
	}
	e := el.Value.(*cacheEntry)
	if e.rec.Expired(now) || time.Since(e.cached) > c.maxAge {
		c.removeLocked(el)
		return Record{}, false
	}
	c.ll.MoveToFront(el)
	return e.rec, true
}

// put caches rec if it is terminal. in_progress and unknown records are
// never cached: they change.
func (c *replayCache) put(k string, rec Record) {
	if c == nil || !rec.State.Terminal() {
		return
	}
	e := &cacheEntry{k: k, rec: rec, cached: time.Now(),
		size: replayCacheOverhead + len(k) + len(rec.Scope) + len(rec.Key) + len(rec.Result) + len(rec.Intent) + len(rec.AttemptID)}
	if e.size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[k]; el != nil {
		c.removeLocked(el)
	}
	c.m[k] = c.ll.PushFront(e)
	c.size += e.size
	for c.size > c.max {
		c.removeLocked(c.ll.Back())
	}
}

func (c *replayCache) invalidate(k string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[k]; el != nil {
		c.removeLocked(el)
	}
}

func (c *replayCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.ll.Remove(el)
	delete(c.m, e.k)
	c.size -= e.size
}

// bytes reports the cache's accounted size (for tests).
func (c *replayCache) bytes() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
