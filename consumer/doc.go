// Package consumer turns an at-least-once message consumer into one whose
// effects happen exactly once, whatever the broker.
//
// A [Processor] wraps a handler with an [idem.Engine]. For each delivery it
// derives a key ([KeyFunc]; the broker's message id by default), a scope (the
// stream and consumer, or the queue) and a fingerprint (SHA-256 of the body),
// claims the key, runs the handler, records the outcome, and only then tells
// the adapter what to do with the delivery, as a [Decision]:
//
//   - first delivery: run, record, then [ActionAck];
//   - redelivery of a recorded success: [ActionAck] without running;
//   - redelivery while another consumer holds the claim: [ActionRetry] with a
//     delay (the handler never runs twice);
//   - handler error: recorded failed and [ActionDeadLetter]; or, when the
//     error is wrapped with [idem.Release] ("nothing happened"), released and
//     [ActionRetry], until MaxDeliveries, when it is recorded failed and
//     dead-lettered (poison messages end with their record, never in a loop);
//   - same key, other payload: [ActionDeadLetter] with [ReasonMismatch], a
//     warning in the log and an [idem.OutcomeMismatch] event; never acked as
//     a duplicate;
//   - unknown outcome (a crash, a panic or a timeout after the claim): the
//     optional [RecoverFunc] looks at the effect itself and resolves the
//     record; undecided records are parked ([ActionDeadLetter] with
//     [ReasonUnknown]) for reconciliation and never re-run by the consumer.
//
// Contrast with a deduplicator that marks a message "seen" before its handler
// runs: there, a failed message's redelivery is dropped silently. Here the
// claim is released or recorded, and the ack follows the durable outcome.
//
// # Crash after the claim, before the effect
//
// A consumer killed between claim and effect leaves an in_progress record.
// Redeliveries are retried while its lease holds; after the lease the engine
// marks it unknown and never re-runs it by itself. Two ways out, both tested
// with real processes killed by SIGKILL:
//
//   - Transactional local effects ([NewTx]): claim, effect and record commit
//     in one database transaction, so a kill before the commit leaves no
//     claim at all and the redelivery runs the effect once.
//   - A [RecoverFunc] that checks the effect (a ledger row, a provider
//     lookup by the forwarded key): absent → the record is released and the
//     handler runs once in the same delivery; present → recorded succeeded
//     and acked.
//
// Broker adapters live in natsconsumer, amqpconsumer and kafkaconsumer;
// webhooks and batch jobs in packages webhook and batch.
package consumer
