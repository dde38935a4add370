package redisstore

import "github.com/redis/go-redis/v9"

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
