package idem

import (
	"sync"
	"time"
)

// ReplayCacheConfig configures the in-process cache of terminal records,
// which answers a replay without a store round trip. It is on by default
// for every store (docs/performance.md, "The replay cache on by default").
//
// A succeeded or failed record never changes until it expires — with one
// exception: an operator's forced resolution (Resolve with Force, `idem
// resolve --force`), which may change its outcome or delete it. What bounds
// how long a cached entry can differ from the store:
//
//   - Expiry: exact. Every hit checks the record's own expiry against the
//     engine clock, so an expired record is never replayed from the cache.
//   - Sweeps: none beyond expiry. A sweeper deletes only expired records,
//     which the cache already treats as gone (up to the clock skew between
//     the sweeper's host and this one, and never longer than MaxAge).
//   - A forced resolution through this engine: none. [Engine.Resolve]
//     invalidates the entry before and after the store's write.
//   - A forced resolution by another process (the CLI, another replica, a
//     reconciler on another host) or a record changed in the database by
//     hand: at most MaxAge. No message reaches this cache; an entry is
//     trusted for MaxAge after it was cached, then the store is read again.
//
// For process-local stores (see [ProcessLocal]) every change goes through
// this process, and the cache is exact.
type ReplayCacheConfig struct {
	// MaxBytes bounds the memory the cache uses (records' results, intents
	// and keys). 0 takes the default, 32 MiB. Negative disables the cache:
	// every replay then reads the store.
	MaxBytes int
	// MaxAge bounds how long an entry is trusted: how long a change made
	// by another process can go unseen here. Defaults to 1s for stores
	// other processes share and to 10s for process-local ones.
	MaxAge time.Duration
	// CacheRecorded also puts each outcome this engine records into the
	// cache (over a store other processes share), so that even the first
	// retry to reach this process needs no store read. It costs every
	// first-time request a cache insert and keeps MaxBytes of the most
	// recent outcomes in the heap, which the collector then scans: on a
	// first-time-heavy load it measured slower than leaving it off
	// (docs/performance.md). Defaults to false: the cache takes the
	// records replays read, so a key's first replay here reads the store
	// and the ones after it, within MaxAge, do not.
	CacheRecorded bool
}

// Replay cache defaults (see [ReplayCacheConfig]).
const (
	defaultReplayCacheBytes        = 32 << 20
	defaultReplayCacheMaxAgeShared = time.Second
	defaultReplayCacheMaxAgeLocal  = 10 * time.Second
)

// ProcessLocal is implemented by stores whose records no other process can
// change (the memory store). The replay cache is exact for them. Such a
// store answers a replay from its own memory, so the cache takes the
// records replays read, not a copy of every outcome recorded.
type ProcessLocal interface {
	ProcessLocal() bool
}

// processLocal reports whether store says it is process-local.
func processLocal(store Store) bool {
	pl, ok := store.(ProcessLocal)
	return ok && pl.ProcessLocal()
}

const replayCacheOverhead = 160 // bytes per entry beyond its variable parts

// cacheKey is a record's identity; a struct, so that looking it up builds no
// string.
type cacheKey struct{ scope, key string }

// cacheEntry is one cached record and its place in the LRU list. The
// record is never modified once cached.
type cacheEntry struct {
	k          cacheKey
	rec        *Record
	cached     time.Time
	size       int
	prev, next *cacheEntry
}

// cacheEntryCopy is an entry with its own copy of the record, allocated at
// once.
type cacheEntryCopy struct {
	cacheEntry
	r Record
}

// replayCache is an LRU of terminal records bounded in bytes. Its list is
// threaded through the entries (head most recent), so an entry is one
// allocation.
type replayCache struct {
	mu         sync.Mutex
	max        int
	maxAge     time.Duration
	size       int
	head, tail *cacheEntry
	m          map[cacheKey]*cacheEntry
}

func newReplayCache(cfg ReplayCacheConfig, store Store) *replayCache {
	max := cfg.MaxBytes
	if max == 0 {
		max = defaultReplayCacheBytes
	}
	if max < 0 {
		return nil
	}
	age := cfg.MaxAge
	if age <= 0 {
		age = defaultReplayCacheMaxAgeShared
		if processLocal(store) {
			age = defaultReplayCacheMaxAgeLocal
		}
	}
	return &replayCache{max: max, maxAge: age, m: make(map[cacheKey]*cacheEntry)}
}

// get returns the cached terminal record for (scope, key) if it is still
// trustworthy at now (not expired, not older than MaxAge).
func (c *replayCache) get(scope, key string, now time.Time) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[cacheKey{scope, key}]
	if e == nil {
		return Record{}, false
	}
	if e.rec.Expired(now) || time.Since(e.cached) > c.maxAge {
		c.removeLocked(e)
		return Record{}, false
	}
	if e != c.head {
		c.unlinkLocked(e)
		c.pushFrontLocked(e)
	}
	return *e.rec, true
}

// put caches a copy of *rec if it is terminal. in_progress and unknown
// records are never cached: they change.
func (c *replayCache) put(scope, key string, rec *Record) {
	if c == nil || !rec.State.Terminal() {
		return
	}
	size := entrySize(scope, key, rec)
	if size > c.max {
		return
	}
	e := &cacheEntryCopy{r: *rec}
	e.rec = &e.r
	c.insert(scope, key, &e.cacheEntry, size)
}

// putOwned is put for a record nobody else holds or will modify (one a
// store has just returned, see [Store.Finish]): the cache keeps rec
// itself rather than a copy. The entry is dated now, a time.Now reading
// taken just before.
func (c *replayCache) putOwned(scope, key string, rec *Record, now time.Time) {
	if c == nil || !rec.State.Terminal() {
		return
	}
	size := entrySize(scope, key, rec)
	if size > c.max {
		return
	}
	c.insertAt(scope, key, &cacheEntry{rec: rec}, size, now)
}

func entrySize(scope, key string, rec *Record) int {
	return replayCacheOverhead + len(scope) + len(key) + len(rec.Scope) + len(rec.Key) + len(rec.Result) + len(rec.Intent) + len(rec.AttemptID)
}

func (c *replayCache) insert(scope, key string, e *cacheEntry, size int) {
	c.insertAt(scope, key, e, size, time.Now())
}

// insertAt is insert dated now.
func (c *replayCache) insertAt(scope, key string, e *cacheEntry, size int, now time.Time) {
	e.k, e.cached, e.size = cacheKey{scope, key}, now, size
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[e.k]; old != nil {
		c.removeLocked(old)
	}
	c.m[e.k] = e
	c.pushFrontLocked(e)
	c.size += e.size
	for c.size > c.max {
		c.removeLocked(c.tail)
	}
}

func (c *replayCache) invalidate(scope, key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[cacheKey{scope, key}]; e != nil {
		c.removeLocked(e)
	}
}

func (c *replayCache) pushFrontLocked(e *cacheEntry) {
	e.prev, e.next = nil, c.head
	if c.head != nil {
		c.head.prev = e
	} else {
		c.tail = e
	}
	c.head = e
}

func (c *replayCache) unlinkLocked(e *cacheEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (c *replayCache) removeLocked(e *cacheEntry) {
	c.unlinkLocked(e)
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
