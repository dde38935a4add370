// Package idemlambda runs AWS Lambda handlers with exactly-once effects:
// HTTP events (API Gateway REST and HTTP APIs, Function URLs) keyed by
// their Idempotency-Key header or a JSON pointer into the event, and SQS
// batches whose records each run once, answered with a partial batch
// response.
//
// It answers the failures AWS Lambda Powertools' idempotency users report
// (each a named test of this package, on dynamostore):
//
//   - a record reclaimed as abandoned while its first run goes on
//     (Powertools python #8386, #8387, TypeScript #5678, #5714): a claim
//     here is held by a lease the engine heartbeats while the effect
//     runs; a duplicate gets 409 (or waits), and a claim whose lease
//     passed becomes unknown, which is never re-run;
//   - a rejected duplicate deleting the running request's lock
//     (TypeScript #5675): every write is fenced by the claim's attempt;
//     a duplicate writes nothing;
//   - a Lambda timeout letting a withdrawal run again (python #8049): the
//     effect is bounded by the invocation's remaining time less
//     Config.DeadlineMargin; cut there it is recorded unknown, never
//     released, and a retry answers outcome-unknown instead of running it.
//
// Powertools' options have their counterparts in [Config]: KeyPointer for
// event_key_jmespath, FingerprintPointers for payload_validation_jmespath,
// Optional for raise_on_no_idempotency_key=False, and the engine's replay
// cache (idem.Config.ReplayCache) for use_local_cache. Unlike Powertools,
// a handler's error is recorded as a failure and replayed, not deleted
// and re-run: the effect may have started.
//
// Build the engine and the wrappers once per container, in main before
// lambda.Start, so warm invocations share them.
package idemlambda
