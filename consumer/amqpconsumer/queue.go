package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
)

// QueueSpec names a work queue and its dead-letter path.
type QueueSpec struct {
	// Queue is the work queue. Required.
	Queue string
	// DeadLetterExchange receives messages nacked without requeue. Defaults
	// to Queue + ".dlx".
	DeadLetterExchange string
	// DeadLetterQueue is bound to DeadLetterExchange and keeps the dead
	// letters. Defaults to Queue + ".dlq".
	DeadLetterQueue string
	// DeliveryLimit, when positive, is the quorum queue's x-delivery-limit:
	// RabbitMQ dead-letters a message delivered more often. Keep it above
	// the processor's MaxDeliveries so the record is written first.
	// Defaults to none.
	DeliveryLimit int
}

// DeclareQueue declares a durable quorum queue whose rejected messages go to
// a fanout dead-letter exchange and a durable dead-letter queue:
//
//	queue (x-queue-type=quorum, x-dead-letter-exchange=<dlx>)
//	  └─ nack(requeue=false) ─▶ <dlx> (fanout) ─▶ <dlq>
//
// It is idempotent for the same spec.
func DeclareQueue(ch *amqp.Channel, s QueueSpec) error {
	if s.Queue == "" {
		return errors.New("amqpconsumer: QueueSpec.Queue is required")
	}
	if s.DeadLetterExchange == "" {
		s.DeadLetterExchange = s.Queue + ".dlx"
	}
	if s.DeadLetterQueue == "" {
		s.DeadLetterQueue = s.Queue + ".dlq"
	}
	if err := ch.ExchangeDeclare(s.DeadLetterExchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("amqpconsumer: declare %s: %w", s.DeadLetterExchange, err)
	}
	if _, err := ch.QueueDeclare(s.DeadLetterQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("amqpconsumer: declare %s: %w", s.DeadLetterQueue, err)
	}
	if err := ch.QueueBind(s.DeadLetterQueue, "", s.DeadLetterExchange, false, nil); err != nil {
		return fmt.Errorf("amqpconsumer: bind %s: %w", s.DeadLetterQueue, err)
	}
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": s.DeadLetterExchange}
	if s.DeliveryLimit > 0 {
		args["x-delivery-limit"] = int64(s.DeliveryLimit)
	}
	if _, err := ch.QueueDeclare(s.Queue, true, false, false, false, args); err != nil {
		return fmt.Errorf("amqpconsumer: declare %s: %w", s.Queue, err)
	}
	return nil
}

// ErrNotConfirmed is returned by [Publisher.Publish] when the broker nacks
// a publish (it did not take responsibility for the message).
var ErrNotConfirmed = errors.New("amqpconsumer: publish not confirmed by the broker")

// Publisher publishes with publisher confirms on one channel. It is safe
// for concurrent use.
type Publisher struct {
	mu sync.Mutex
	ch *amqp.Channel
}

// NewPublisher puts ch into confirm mode. Use ch only through the
// publisher afterwards.
func NewPublisher(ch *amqp.Channel) (*Publisher, error) {
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqpconsumer: confirm mode: %w", err)
	}
	return &Publisher{ch: ch}, nil
}

// Publish sends msg with MessageId set to key (persistent unless
// msg.DeliveryMode says otherwise) and returns once the broker has
// confirmed it, or [ErrNotConfirmed]. Retrying after an error publishes the
// same key again, which the consumer deduplicates.
func (p *Publisher) Publish(ctx context.Context, exchange, routingKey string, key idem.Key, msg amqp.Publishing) error {
	if err := idem.ValidateKey(string(key)); err != nil {
		return err
	}
	msg.MessageId = string(key)
	if msg.DeliveryMode == 0 {
		msg.DeliveryMode = amqp.Persistent
	}
	p.mu.Lock()
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, false, false, msg)
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("amqpconsumer: publish: %w", err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("amqpconsumer: wait for confirm: %w", err)
	}
	if !ok {
		return ErrNotConfirmed
	}
	return nil
}
