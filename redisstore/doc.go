// Package redisstore is an [idem.Store] and [idem.Notifier] on Redis, for
// a standalone server, Sentinel or Cluster, through go-redis v9's
// [redis.UniversalClient].
//
// # Layout
//
// One record is one hash at "{prefix}:{<tag>}:rec", where <tag> is the
// scope and key, percent-escaped so that two pairs never share a tag. Its
// notification channel is "{prefix}:{<tag>}:ch". The hash tag puts both in
// one Cluster slot, so every script touches a single slot.
//
// # Atomicity
//
// Claim is one Lua script (EVALSHA, cached): it writes a new in_progress
// record only when none exists or the stored one is terminal and expired at
// the caller's Now; otherwise it returns the existing record and writes
// nothing. Finish, Release, Heartbeat, Resolve and SetMark are scripts
// that check the fence and attempt id before writing. Sweep deletes each
// record in a script that re-checks "terminal and expired" itself.
//
// Scripts run by EVALSHA and cross the wire once per server (go-redis
// falls back to EVAL only on NOSCRIPT). Each reads every field it needs
// with one HMGET and returns a record as that positional array (no field
// names, decoded without a map); Finish builds its reply from that read
// and the values it wrote, so it costs no second read.
//
// # Replays
//
// When most recent claims found a live record, Claim first reads the hash
// with a plain HMGET, no script: a replay then costs one read, like a raw
// HGETALL. The read decides nothing: an absent or expired record goes to
// the claim script, which decides atomically. The caller's own in_progress
// claim is answered from the read too, except with [Config].Wait set
// (durability is confirmed on the script's connection). A Cluster client
// that may read from replicas (ReadOnly, RouteByLatency, RouteRandomly)
// never takes this path, since a replica may lag. When most recent claims
// were first-time, Claim runs the script straight away.
//
// # Performance
//
// Measured on a shared 2-core VM against Redis 7.0 (appendonly no) with
// `idem bench --concurrency 16,64 --duration 3s --scenarios first,replay`:
// idem through the engine against raw commands (SET NX + HSET, HGETALL) in
// the same run, the previous version run just before; load average 3 to 7.
//
//	idem/raw            before (c=16 / c=64)   now, two runs (c=16 / c=64)
//	replay              0.48 / 0.50            0.72–1.00 / 0.71–0.93
//	first-time          0.41 / 0.45            0.52–0.57 / 0.43–0.51
//
// A first request is two scripts (claim, finish) against two plain
// commands. On Redis 7.0 a script call costs several times a plain command
// on the server (INFO commandstats: 15–30 µs per EVALSHA against 1–9 µs
// for SET or HSET on this machine), and the client and server share the
// two cores, so the first-time ratio stays well under 1. Closing that gap
// needs a claim without a script: a single packed value claimed by SET NX
// GET (Redis 7.0+), or HSETEX FNX (Redis 8.0+); both change the record
// layout and are not done here. Replays cost one HMGET plus the engine's
// own work on the client.
//
// # Retention
//
// When a record becomes succeeded or failed it gets a Redis TTL at
// ExpiresAt plus [Config].ExpiryGrace, and its ExpiresAt is also stored in
// the hash. Claim decides expiry from the stored ExpiresAt, so a TTL that
// fires late never keeps an expired intent alive past the caller's clock,
// and one that fires early (a Redis clock ahead of the callers') is covered
// by the grace. in_progress and unknown records never get a TTL: unknown
// records are evidence and stay until resolved.
//
// # Durability — read this before using Redis for payments
//
// Redis acknowledges a write once it is in the primary's memory. With the
// default persistence (RDB snapshots, or appendonly yes with appendfsync
// everysec) a crash of the primary can lose about the last second of
// writes, and a failover to an asynchronously replicated replica can lose
// whatever it had not received yet. A lost claim is the dangerous case: the
// effect already ran, the record is gone, and a retry claims the key again
// and runs the effect a second time. This store cannot prevent that by
// itself. To narrow or close the window:
//
//   - run Redis with appendonly yes and appendfsync always, so a claim is
//     fsynced before Redis answers (each write costs an fsync);
//   - set [Config].Wait: after a successful claim, Claim runs WAIT
//     (replicas acknowledged it) and/or WAITAOF (Redis 7.2+: the primary
//     and/or replicas fsynced it) on the claim's own connection, and
//     returns an error wrapping [ErrNotDurable] instead of "claimed" when
//     the acknowledgements do not arrive in time, so the effect does not
//     run on a claim that is not yet durable. WAIT alone is not a
//     guarantee: Redis replication stays asynchronous, and a failover may
//     still promote a replica that did not acknowledge.
//
// Outcome writes (Finish) are not waited on: losing one leaves the record
// in_progress, which turns unknown when its lease passes — never a
// duplicate.
//
// # Notifications
//
// Every write script publishes on the record's channel, with SPUBLISH
// (sharded pub/sub, Redis 7.0+) or PUBLISH. Subscribe shares one
// subscriber connection per Store (per master in a Cluster with sharded
// pub/sub) and signals waiters every [Config].PollFallback as well, because
// pub/sub messages are lost while a connection is down or a slot migrates.
//
// # Departures from the contract
//
//   - List and Sweep SCAN the store's keys (on every master in a Cluster):
//     their cost grows with the number of records, and a concurrent
//     resharding may make a SCAN miss or repeat keys; Sweep catches what a
//     run missed on the next run, and List is an operator tool.
//   - Sweep treats a Limit of 0 or less as no limit.
//   - Store.Close does not close the client, which the caller owns.
package redisstore
