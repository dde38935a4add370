// Package natsstore is an [idem.Store] on a NATS JetStream key-value
// bucket: exactly-once effects for users who run NATS already, with every
// claim held by a quorum of the bucket's replicas before its effect runs.
//
// # Operations
//
// Each record is one value of the bucket. The claim is the bucket's
// create: a publish that expects the key to have no value, decided by the
// leader of the bucket's stream and acknowledged once a majority of its
// replicas holds it. When the key holds a record, the claim returns it (a
// replay writes nothing); an expired terminal record is replaced by a
// write at exactly its revision. Every other write — an outcome, a
// heartbeat, a resolution, a mark, a release (a delete) — reads the record
// from the stream's leader, checks the fence and attempt in it, and writes
// at the revision it read: a write that finds the revision moved on reads
// and decides again, so no check is separated from its write.
//
// Two shortcuts keep the request path at one request a step: when recent
// claims mostly found a record, Claim reads first (from any replica: an
// older revision can only make it wait, retry, or write and fail), and
// Finish given the caller's claim writes at the revision this store wrote
// that claim at, so the stored record is exactly the claim. Waiters learn
// of an outcome through a watch of the record's key (an ordered consumer
// delivering its new revisions, headers only): no polling.
//
// # Keys
//
// A record lives under "r." + escape(scope) + "." + escape(key), where
// escape keeps letters, digits, '-', '_' and '/' and writes every other
// byte as '=' and two hex digits (the empty string as "="): a valid KV key
// for any scope and key, and never the same for two pairs. A bucket holds
// the records of one deployment; List and Sweep read the bucket (or one
// scope's keys) with a watch that delivers the last value of each key,
// read until the last message the stream's leader held for those keys
// when the read began has arrived: the watch's own end marker, counted on
// whichever replica serves it, comes early on one that lags.
//
// # Retention
//
// The sweeper ([idem.NewSweeper]) removes expired succeeded and failed
// records, each with a delete at the revision it judged, so a record
// re-claimed after the sweeper read it is spared. The bucket itself must
// have no TTL (MaxAge): JetStream would delete each record a fixed time
// after its last write, whatever its state — unknown records, which are
// evidence and must never expire, would go, and so would succeeded
// records still inside the retention window of a record whose outcome
// came late, their retries then running the effect again. A bucket TTL is
// one duration for every key, while each record's ExpiresAt is counted
// from its own outcome; and a per-message TTL can be set on a create or
// purge but not on an update, which is how an outcome is written.
// [Store.CheckDurability] refuses a bucket with a TTL. A delete leaves a
// small marker per key, which the next claim of the key replaces.
//
// # Durability
//
// JetStream acknowledges a write once a majority of the bucket's replicas
// has it, and each server syncs its files on its own schedule
// (sync_interval, 2 minutes by default). A bucket of three replicas keeps
// every acknowledged claim through the loss of any one server; one of a
// single replica loses what its server had not synced when its machine
// crashes, and one in memory loses everything in a restart.
// [Store.CheckDurability] reports both, and a bucket TTL, as findings
// that make [idem.New] refuse the store unless
// Config.AllowVolatileStore is set; `idem doctor` names them.
// [Store.CheckReplication] refuses a replicated bucket on a nats-server
// older than 2.10.19, which can accept two conditional updates at one
// revision (nats-server issue #4320): two attempts would both hold a key.
// [CreateBucket] (and `idem migrate`) makes the bucket: file storage, three
// replicas unless told otherwise, one value per key, no TTL.
//
// Every request is bounded by Config.CallTimeout: while a stream elects a
// new leader JetStream leaves requests unanswered, and the engine retries
// a call that timed out (a claim whose answer was lost is recognised as
// the caller's own).
package natsstore
