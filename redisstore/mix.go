package redisstore

import (
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// claimMix tracks whether recent claims found a live record, so Claim can
// pick the cheaper path: a plain HMGET first when duplicates dominate (a
// replay then costs one read, no script), the script straight away when
// first-time claims dominate (saving them the read). Both paths give the
// same answers; only their cost differs.
type claimMix struct{ score atomic.Int32 }

// mixBound caps the score, so a change of workload is noticed within a
// few dozen claims.
const mixBound = 16

func (m *claimMix) readFirst() bool { return m.score.Load() >= 0 }

// observe records whether a claim found a live record.
func (m *claimMix) observe(existing bool) {
	d := int32(-1)
	if existing {
		d = 1
	}
	if v := m.score.Load() + d; v >= -mixBound && v <= mixBound {
		m.score.Store(v) // racy by design: a lost update only delays the switch
	}
}

// primaryReads reports whether the client sends read commands to the
// primary that the scripts write on. A Cluster client routing reads to
// replicas (ReadOnly, RouteByLatency, RouteRandomly) may answer from a
// lagging copy, so Claim's read-first path is off for it.
func primaryReads(c redis.UniversalClient) bool {
	if cc, ok := c.(*redis.ClusterClient); ok {
		o := cc.Options()
		return !o.ReadOnly && !o.RouteByLatency && !o.RouteRandomly
	}
	return true
}
