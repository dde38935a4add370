// Package natsconsumer runs a [consumer.Processor] on a NATS JetStream pull
// consumer, so that each message's effect happens once however often
// JetStream delivers it.
//
// Per delivery: the message's Nats-Msg-Id is the default key and
// "<stream>/<consumer>" the default scope; while the processor runs, the
// message is kept from redelivery with InProgress() every third of the
// consumer's AckWait, so an effect longer than AckWait needs no longer
// AckWait. Then, by the processor's [consumer.Decision]:
//
//   - ack: DoubleAck, the ack confirmed by the server. A lost or late ack
//     (after AckWait, when the message may already be redelivered) is not
//     trusted as "done": the record is, and the redelivery is acked without
//     running the effect.
//   - retry: NakWithDelay(delay). An in-flight duplicate is never run.
//   - dead letter: the message is published (with its headers and
//     Idem-Reason, Idem-Scope, Idem-Error) to Config.DeadLetterSubject, which
//     a stream must capture, and then terminated. The publish is confirmed
//     before the Term; if it fails the message is retried instead, so a dead
//     letter is never lost. Its Nats-Msg-Id is derived from the original id,
//     the reason and the payload, so a dead letter published twice (a crash
//     between the publish and the Term) is stored once, while a mismatched
//     payload under the same id is kept beside the original. Without
//     DeadLetterSubject the message is only terminated, and JetStream's
//     MSG_TERMINATED advisory plus the record remain. (Term, not
//     TermWithReason: servers before 2.10.4 ignore the latter.)
//
// Keep the consumer's MaxDeliver above the processor's MaxDeliveries, so a
// poison message is recorded and dead-lettered before JetStream stops
// delivering it.
//
// [Publish] sets Nats-Msg-Id from an intent's key, so the stream's own
// duplicate window and idem agree on the message's identity.
package natsconsumer
