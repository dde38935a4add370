// Package amqpconsumer runs a [consumer.Processor] on a RabbitMQ queue
// (github.com/rabbitmq/amqp091-go) with manual acknowledgements, so that each
// message's effect happens once however often RabbitMQ delivers it.
//
// Per delivery: the AMQP message-id is the default key and the queue name
// the default scope. By the processor's [consumer.Decision]:
//
//   - ack: basic.ack after the outcome is recorded. AMQP acks are not
//     confirmed; a lost ack means one redelivery, which replays from the
//     record without running the effect.
//   - retry: the worker waits the decision's delay, then basic.nack with
//     requeue. AMQP has no delayed requeue; holding the message for the
//     delay keeps an in-flight duplicate from spinning, at the cost of one
//     prefetch slot.
//   - dead letter: basic.nack without requeue, so RabbitMQ moves the message
//     to the queue's dead-letter exchange (x-dead-letter-exchange; see
//     [DeclareQueue]). The reason is in the log, the observer's outcome and
//     the record; RabbitMQ adds its own x-death header.
//
// Delivery counts: quorum queues report x-delivery-count, which the processor
// uses to give up on a message that keeps releasing (MaxDeliveries) with a
// failed record and a dead letter. Classic queues only say "redelivered",
// so there the count is unknown and only the broker's limits apply; use
// quorum queues ([DeclareQueue] does).
//
// [Publisher] publishes with publisher confirms and sets message-id from an
// intent's key.
package amqpconsumer
