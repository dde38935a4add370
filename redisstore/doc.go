// Package redisstore is an [idem.Store] and [idem.Notifier] on Redis, for
// a standalone server, Sentinel or Cluster, through go-redis v9's
// [redis.UniversalClient].
//
// # Layout
//
// One record is one Redis string at "{prefix}:{<tag>}:rec", where <tag> is
// the scope and key, percent-escaped so that two pairs never share a tag.
// Its notification channel is "{prefix}:{<tag>}:ch". The hash tag puts both
// in one Cluster slot, so every command and script touches a single slot.
//
// The value is packed, in layout version "I1":
//
//	"I1" state fence ":" len ":" attempt
//	expires ";" completed ";" len ":" result
//	lease ";" created ";" len ":" mark
//	len ":" scope len ":" key fingerprint intent
//
// state is one byte (p in_progress, s succeeded, f failed, u unknown),
// times are Unix microseconds in decimal (empty for none), strings but the
// last are prefixed by their length in bytes, the fingerprint is 32 raw
// bytes and the intent runs to the end. "fence:len:attempt" is the holder
// token: it is self-delimiting, so a value whose header starts with the
// token of (fence, attempt) is held by exactly that attempt, and the write
// scripts compare it as a prefix instead of decoding the record.
//
// The version marker makes a change of layout explicit. Records written by
// versions before "I1" were hashes: every operation on such a key fails
// with an error that says so (Redis answers WRONGTYPE), as it does for a
// string of another layout; nothing reads them as absent or overwrites
// them. Delete them (or let them expire) before upgrading.
//
// # Atomicity
//
// Claim is one plain command on Redis 7.0+: SET key value NX GET writes
// the new in_progress record only if the key is free, and otherwise
// answers with the stored value and writes nothing, so
// claim-or-return-existing is one atomic round trip decided by Redis. A
// stored record that is terminal and expired at the caller's Now goes to
// a Lua script that re-checks and takes the key over under fence + 1. On
// servers without SET NX GET (detected at New: no SPUBLISH, which came in
// the same release) that script is the whole claim.
//
// Finish, Release, Heartbeat, Resolve and SetMark are scripts that check
// the holder token (or the fence) before writing. Given the caller's
// claim ([idem.FinishParams].Claim), Finish sends the claim's exact value
// and the exact new value: when the stored value is still the claim (no
// heartbeat or mark since), the script compares the two strings once,
// writes the new value and answers 1, and the store builds the record
// from the claim, so a first-time finish does no decoding in Lua and
// reads nothing back. Otherwise the script compares the token as a prefix
// of the stored value, finds the end of the result with three string
// searches, keeps the rest of the value as one slice and answers with the
// new value, so it costs one GET and one SET on the server and no second
// read. Sweep deletes each record in a script that re-checks "terminal
// and expired" itself. Scripts run by EVALSHA and cross the wire once per
// server (go-redis falls back to EVAL only on NOSCRIPT).
//
// # Replays
//
// When most recent claims found a live record, Claim first reads the
// record with a plain GET: a replay then sends no record and costs one
// read. The read decides nothing: an absent or expired record goes to the
// claim above, which decides atomically. The caller's own in_progress
// claim is answered from the read too, except with [Config].Wait set
// (durability is confirmed on the claim's connection). A Cluster client
// that may read from replicas (ReadOnly, RouteByLatency, RouteRandomly)
// never takes this path, since a replica may lag. When most recent claims
// were first-time, Claim sends SET NX GET straight away.
//
// # Performance
//
// A first request is SET NX GET plus the Finish script against raw SET
// NX plus an 8-field HSET; a replay is one GET against raw HGETALL.
// Measured with `idem bench --concurrency 16,64 --duration 2s --scenarios
// first,replay` on a shared 2-core VM (Redis 7.0, appendonly no, load
// average 1.5–2), interleaved with the hash layout that came before:
//
//	idem/raw        hash layout (c=16 / c=64)   layout I1 (c=16 / c=64)
//	first-time      0.51–0.58 / 0.62–0.70       0.69–0.79 / 0.73–0.80
//	replay          0.73–0.84 / 0.76–0.85       0.84–0.93 / 0.92–0.95
//
// The hash layout ran a script for every claim and finish (15–30 µs of
// server time per EVALSHA).
//
// Concurrent callers' claims (SET NX GET) and finishes (EVALSHA) share
// pipelines by default ([Config].Unpipelined): at 64 callers behind
// net/http a first-time request costs 81 µs of process CPU against 114
// µs with every command alone, 1.45× idemlease's throughput against
// 0.99× (docs/performance.md). One command at a time still goes alone.
//
// On the client, the claim's SET NX GET and Finish's EVALSHA both go as
// raw commands (DoRaw alone, a RawCmd through the pipeliner) with their
// arguments, and their bytes when they fit, in one
// allocation, sized exactly; the replies are read without go-redis's
// generic Cmd, and the finish's usual answer is the integer 1. A
// first-time request through the engine makes 24 allocations (raw SET NX
// + HSET: 21): the store's own are its two calls, the record key, the
// channel key and the finished record; go-redis makes 5 per command (the
// command, its reply, and 3 in its per-Get connection health check); the
// engine's finish context (a timer armed when go-redis's pool asks for
// Done on every command), effect context and attempt id make 7. Of the
// store's client CPU, its own code is about 5%; the rest is go-redis and
// the socket.
//
// On the server, time per command swings with the machine's other load;
// instructions do not. Counted under callgrind (TestServerInstructions,
// 2,000 commands pipelined): SET NX GET 7,900, the finish script 41,200
// on the first-time path (44,300 while it also published, 68,100 when it
// decoded the value in Lua), of which EVALSHA itself (turning the keys and
// arguments into Lua strings and tables) is about 24,000; raw SET NX EX
// 9,400 and HSET 27,200. So a first-time request costs the server about
// 49,100 instructions in commands against raw's 36,600 (76,400 two
// versions ago). A pre-loaded FUNCTION (FCALL) costs the same as EVALSHA;
// Redis 7.0 has no conditional write without a script (Redis 8.4 and
// Valkey 8.1 have SET … IFEQ).
//
// TestCPUPerRequest (client CPU by getrusage, server CPU and command time
// per request, raw and idem interleaved), TestScriptCost and
// TestServerInstructions (cpu_test.go, gated by IDEM_CPU_REDIS) are the
// measurement tools; they stay comparable on a loaded machine where
// wall-clock ratios do not.
//
// # Retention
//
// When a record becomes succeeded or failed it gets a Redis TTL at
// ExpiresAt plus [Config].ExpiryGrace, and its ExpiresAt is also stored in
// the packed record. Claim decides expiry from the stored ExpiresAt, so a TTL that
// fires late never keeps an expired intent alive past the caller's clock,
// and one that fires early (a Redis clock ahead of the callers') is covered
// by the grace. in_progress and unknown records never get a TTL: unknown
// records are evidence and stay until resolved.
//
// # Durability — read this before using Redis for payments
//
// Redis acknowledges a write once it is in the primary's memory. What a
// crash of the primary loses depends on its persistence: with none (no
// save points, appendonly no, as caches often run) the restarted primary
// comes back empty — in a Cluster it keeps its slots and serves them, so
// nothing signals the loss; with RDB snapshots only (Redis's default),
// every write since the last snapshot; with appendonly yes and appendfsync
// everysec, about the last second or two of writes. A failover to an
// asynchronously replicated replica can lose whatever it had not received
// yet (see Replication). A lost claim is the dangerous case: the effect
// already ran, the record is gone, and a retry claims the key again and
// runs the effect a second time. To narrow or close the window:
//
//   - run Redis with appendonly yes and appendfsync always, so a claim is
//     fsynced before Redis answers (each write costs an fsync);
//   - set [Config].Wait: after a successful claim, Claim runs WAIT
//     (replicas acknowledged it) and/or WAITAOF (Redis 7.2+: the primary
//     and/or replicas fsynced it) on the claim's own connection, and
//     returns an error wrapping [ErrNotDurable] instead of "claimed" when
//     the acknowledgements do not arrive in time, so the effect does not
//     run on a claim that is not yet durable. From the idem CLI, the DSN
//     parameters wait_replicas, min_replicas, wait_aof_local,
//     wait_aof_replicas and wait_timeout set it.
//
// TestClusterMasterKilled (failover_test.go) SIGKILLs a Cluster master in
// the middle of a race of claims, restarts it and retries every key: with
// appendonly yes and appendfsync always, every claim the cluster
// acknowledged is still there and no effect runs twice. Its negative
// control, TestClusterMasterKilledNoAOF, runs the same on masters without
// persistence: every claim the killed master acknowledged is lost and its
// effect runs again. (A SIGKILL is a process crash; what appendfsync
// always adds over everysec, surviving a machine crash, is not tested.)
//
// Outcome writes (Finish) are not waited on: losing one leaves the record
// in_progress, which turns unknown when its lease passes — never a
// duplicate.
//
// # Replication
//
// Redis replication is asynchronous: the primary answers a write before
// any replica has it. When Sentinel or the Cluster promotes a replica
// after the primary died, whatever that replica had not received is gone,
// claims included, and the retries that follow run their effects again.
// [Store.CheckReplication] reads the replication (INFO replication on the
// primary, on every master of a Cluster; the Sentinels' view with
// [Config].Sentinel) and [idem.New] refuses a setup whose claims a
// failover can lose with [idem.ErrUnsafeReplication], unless
// Config.AllowAsyncReplication.
//
// WAIT alone is not a guarantee. It makes the primary wait for
// acknowledgements, not the replicas agree: replication stays
// asynchronous, and the promoted replica is chosen without regard to who
// acknowledged what — Sentinel by replica-priority, then replication
// offset (then run id); the Cluster by an election that favours the best
// offset. Waiting for N of M replicas therefore covers the claim only if
// the one promoted is among the N: with wait_replicas=1 and two replicas,
// Sentinel promoting the replica that had not acknowledged lost 602 of
// 2,890 claims in the study (TestSentinelFailoverAsync loses them
// every run: the link of the replica Sentinel prefers is stalled). Only a
// claim that every replica acknowledged is on whichever is promoted.
//
// Hence [WaitConfig].Replicas = [AllReplicas] (DSN wait_replicas=all):
// each claim WAITs for every replica its primary counts as connected
// (ROLE) and at least [WaitConfig].MinReplicas (default 1). On Redis
// 7.0+ the claim, a WAIT for as many replicas as the primary's last ROLE
// listed, and a ROLE go in one pipeline on the claim's connection (one
// round trip, as a hand-written SET NX + WAIT); a ROLE that lists more
// replicas than were waited for sends one more WAIT, one that lists fewer
// (a replica left) is satisfied by those that remain. (When the client's
// ReadTimeout does not outlast the wait by a second, under which a
// pipeline's replies are read, ROLE and WAIT go as commands of their
// own.) Not
// acknowledged within the timeout: [ErrNotDurable], which the engine
// reports as the store unavailable (503) before any effect runs; the
// store then releases the claim (no effect ran under it), so a retry
// claims afresh. A fixed count equal to the replicas there are is as safe
// while they are all there, but once a failover leaves fewer (the old
// primary is gone) every claim fails until one is added; AllReplicas
// follows the replicas connected and fails only below MinReplicas, which
// keeps a primary that lost its replicas (or is cut off from them) from
// acknowledging claims that only it holds. Its limits: a replica that
// disconnects while a claim waits makes the wait time out (closed); one
// that is disconnected when the claim is made is not waited for, and if
// it is promoted before it has caught up, claims made while it was away
// are lost — Sentinel does not promote a replica whose link has been down
// longer than ten times down-after-milliseconds, and CheckReplication
// warns about a replica Sentinel knows that is away. A Redis Cluster
// master with one replica has none after a failover: with MinReplicas 1
// its shard refuses claims until a replica (the old master, restarted)
// rejoins; two replicas per master keep it writable.
//
// A retried claim that finds the caller's own in_progress record (its
// first answer was lost, or its wait failed and the release did not go
// through) waits again before it answers "claimed": Redis sets the
// connection's replication mark on every command, so the WAIT after the
// SET NX GET that found the record covers that record's write, whichever
// connection made it (TestOwnClaimWaitsAgain).
//
// TestSentinelFailoverWaitAll and TestClusterFailoverWaitAll kill the
// primary (SIGKILL) under concurrent first-time intents sent twice each,
// with the link of the replica that will be promoted stalled, and retry
// everything after the failover: 0 duplicate effects. Their negative
// controls, TestSentinelFailoverAsync and TestClusterFailoverAsync, lose
// claims every run. An outcome written after such a failover for a claim
// the new primary never had is reported as [idem.ErrStoreLostClaim] by
// the engine.
//
// A Cluster client reloads its slot map after a redirect it follows, and
// otherwise every ClusterOptions.ClusterStateReloadInterval (60s by
// default in go-redis); a dead master sends no redirect, so a failover
// left its shard failing for about a minute. The store reloads the map
// after connection errors, CLUSTERDOWN, TRYAGAIN, READONLY and redirects,
// and idem's DSN sets the interval to 1s (cluster_refresh); either alone
// brings the window to the failover's own time (cluster-node-timeout plus
// the election): 3.7–5.2s with a 2s node timeout, against 59s before
// (TestClusterFailoverWindow). Set ClusterStateReloadInterval on clients
// you build yourself.
//
// # Notifications
//
// Every write script that ends or removes an attempt (Finish, Release,
// Resolve) publishes on the record's channel, with SPUBLISH (sharded
// pub/sub, Redis 7.0+) or PUBLISH — Finish only for a record a subscriber
// marked as awaited. Subscribe marks an in_progress record once its
// subscription is confirmed, by writing its lease with a leading '0' (the
// same time to every reader, but never equal to a value a client built),
// so a finish whose claim is still the stored value exactly knows nobody
// waits and skips the publish. Claims do not publish: nobody waits for a
// record to be claimed. Waiters of a version before the mark (which do not
// mark) still learn of such a finish from their own poll fallback: those
// versions signal every subscription every [Config].PollFallback (1 s by
// default).
//
// Subscribe shares one subscriber connection per Store (per master in a
// Cluster with sharded pub/sub), subscribing each channel with a command
// of its own. Pub/sub messages are lost while a connection is down. The
// store does not cover that by signalling waiters on a timer, which would
// make each waiter's reads grow with its wait (one per PollFallback); it
// signals every subscription of a connection once it is subscribed again:
// after go-redis reconnects, after a connection that went silent is
// replaced (each connection silent for PollFallback gets a PING; one that
// leaves it unanswered for twice PollFallback, at least 5 s, is closed),
// and after a Cluster moved a shard channel's slot. Before signalling, it
// marks the record as awaited, since a claim made meanwhile is not marked;
// for the same reason it marks and signals after a release's or a
// resolve's message, and once more PollFallback after each of these. A
// waiter therefore reads the store when it starts and once per
// notification, however long it waits: 2 reads for 20 waiters over a 6 s
// wait in the conformance suite's cross-instance test (7 when the store
// also signalled every second), as on PostgreSQL. The engine adds its own
// fallback reads, after [idem.Config].PollMax (500 ms by default) and then
// doubling intervals up to 30 s, and one at the holder's lease deadline, which is also how a waiter learns that a
// crashed holder will never publish. With PubSubOff, every subscription
// is signalled every PollFallback.
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
