// Package dynamostore is an [idem.Store] on an Amazon DynamoDB table, for
// services on AWS Lambda and elsewhere that keep their records where
// AWS Lambda Powertools' idempotency users keep theirs.
//
// # How each guarantee is kept
//
//   - Claim is a conditional PutItem: attribute_not_exists(pk) for a free
//     key; a succeeded or failed record expired at the caller's time is
//     taken over by a second PutItem whose condition checks, in the same
//     write, that the item still has that fence, is still terminal and
//     still expired. A duplicate gets the stored record and writes
//     nothing. Never check-then-insert.
//   - Every outcome write (Finish, Release, Heartbeat, Resolve, SetMark)
//     is an UpdateItem or DeleteItem conditioned on the fence and the
//     attempt id: a writer whose record moved on gets idem.ErrFenced and
//     writes nothing. A late outcome is never confused with a re-claim,
//     and a rejected duplicate never deletes the running attempt's record
//     (Powertools TypeScript #5675).
//   - Every read is strongly consistent (GetItem with ConsistentRead).
//   - A record in_progress stays in_progress until its lease passes;
//     nothing reclaims it as "abandoned" while its attempt runs
//     (Powertools python #8386/#8387, TypeScript #5678/#5714): the engine
//     turns a record whose lease passed into unknown, which is never
//     re-run.
//
// # Retention: TTL and the sweeper
//
// A succeeded or failed record carries a TTL attribute, ttl, set to
// ExpiresAt plus Config.TTLGrace. DynamoDB deletes expired items on its
// own schedule, typically within a few days of the TTL, so a record can
// outlive its expiry by days: Claim judges expiry from the stored
// ExpiresAt, never from whether the item still exists, and takes such a
// record over as a new intent — it is never replayed. Sweep (the
// sweeper, `idem sweep`) removes expired records on time through the
// sparse idem-expiry index. Unknown and in_progress records carry no TTL:
// they are never deleted by DynamoDB.
//
// # Listing and capacity
//
// List reads the idem-state-age index (partition "<state>#<shard>", sort
// CreatedAt), never scanning the table; Sweep reads idem-expiry. Each
// index write is billed: a claim writes the table and idem-state-age, an
// outcome rewrites both and adds idem-expiry (keys only). docs/dynamodb.md
// counts the units.
//
// # Replication
//
// A global table with replicas in other regions and eventual multi-region
// consistency can lose an acknowledged claim in a regional failover:
// [Store.CheckReplication] finds it and idem.New refuses the store unless
// Config.AllowAsyncReplication is set.
//
// The table is created by [Store.Migrate] (`idem migrate --store
// dynamodb://TABLE?region=…`) and checked by [Store.CheckSchema] (`idem
// doctor`). The tests run against dynalite, pinned in
// internal/testenv/dynalite.
package dynamostore
