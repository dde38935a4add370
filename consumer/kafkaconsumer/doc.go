// Package kafkaconsumer runs a [consumer.Processor] on a Kafka consumer
// group (github.com/twmb/franz-go), so that each record's effect happens
// once however often Kafka delivers it: after a rebalance, a crash, an
// offset reset or a re-publish.
//
// Kafka's own exactly-once (the idempotent producer, transactions) covers
// a consume-transform-produce loop within Kafka; an effect outside Kafka (a
// charge, an email, a row in another database) still runs once per
// delivery. This package puts idem's claim and record between the delivery
// and the effect.
//
// Keys: the value of a header (Config.KeyHeader, "Idem-Key" by default),
// or "<topic>:<partition>:<offset>" (Config.OffsetKey) for events without
// one. The offset key is the weaker choice: it covers redeliveries of the
// stored record, not the same event produced twice. The default scope is
// "<group>/<topic>".
//
// Offsets: the records of a partition are processed in order, and a
// partition's offset is committed (manually; autocommit is off) only past
// records whose decision is carried out:
//
//   - ack: the outcome is recorded (now, or before: a replay is committed
//     without running the effect);
//   - retry (an in-flight duplicate, a release, a store failure): the
//     partition waits the decision's delay and processes the same record
//     again; nothing after it is processed or committed meanwhile, and it
//     is never skipped;
//   - dead letter (failed, mismatch, invalid key, and unknown outcomes,
//     which go to reconciliation and never back into the handler): the
//     record is produced to Config.DeadLetterTopic with its key, value and
//     headers plus the Idem-* headers, and committed past once the broker
//     acknowledged it; a failed produce retries instead. A crash between
//     the produce and the commit produces the dead letter again: its
//     Idem-Topic, Idem-Partition and Idem-Offset headers identify it.
//
// Kafka keeps no delivery count: Message.Delivery is the attempt count in
// this process, which bounds a handler that keeps releasing
// (consumer.Config.MaxDeliveries).
//
// # Rebalances
//
// The consumer handles a rebalance with OnPartitionsRevoked (see
// [Consumer.Opts]) rather than BlockRebalanceOnPoll: a revoked partition
// stops after the record in hand, whose effect finishes and whose outcome
// is recorded, and is committed up to there before the callback returns
// and the partition moves. Only the revoked partitions wait, and a record
// waiting to be retried (an in-flight duplicate) gives up its wait at once
// instead of holding the whole group's rebalance, as a poll blocking
// rebalances would. If the effect outlasts the group's rebalance timeout,
// the member is removed from the group and the new owner receives the
// record while its claim is still held: the duplicate is retried (never
// run) until the outcome is recorded, and then replays; the old member's
// commit is refused. Either way the effect runs once and no commit passes
// an unrecorded outcome.
//
// The local-transaction path is the processor's: build it with
// [consumer.NewTx] and claim, effect and record commit in one SQL
// transaction. For consume-process-produce, [Consumer.RunTransact] runs a
// processor made with consumer.NewValue and [Produce] in a franz-go
// GroupTransactSession: the outcome, with the records to produce, is
// recorded before the Kafka transaction commits them with the offsets; an
// aborted transaction's records are delivered again and replay, producing
// the recorded output without running the effect.
package kafkaconsumer
