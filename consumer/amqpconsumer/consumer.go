package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/consumer"
)

// Config configures [Run].
type Config struct {
	// Processor runs each message's effect. Required.
	Processor *consumer.Processor
	// Queue is the queue to consume. Required.
	Queue string
	// ConsumerTag names the consumer on the channel. Defaults to a tag the
	// server generates.
	ConsumerTag string
	// Workers is how many deliveries are processed at once; it is also the
	// channel's prefetch count. Defaults to 1.
	Workers int
	// Logger receives ack failures. Defaults to discarding logs.
	Logger *slog.Logger
}

// Run consumes cfg.Queue on ch with manual acks until ctx ends or the
// channel closes. It sets the channel's prefetch to Workers. Deliveries in
// hand when ctx ends are still settled.
func Run(ctx context.Context, ch *amqp.Channel, cfg Config) error {
	if ch == nil || cfg.Processor == nil || cfg.Queue == "" {
		return errors.New("amqpconsumer: Run: channel, Config.Processor and Config.Queue are required")
	}
	if cfg.Workers < 0 {
		return fmt.Errorf("amqpconsumer: Config.Workers must not be negative, got %d", cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := ch.Qos(cfg.Workers, 0, false); err != nil {
		return fmt.Errorf("amqpconsumer: qos: %w", err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, cfg.Queue, cfg.ConsumerTag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqpconsumer: consume %s: %w", cfg.Queue, err)
	}
	sem := make(chan struct{}, cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			requeue(deliveries)
			return nil
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("amqpconsumer: delivery channel closed")
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				Handle(ctx, cfg, d)
			}()
		}
	}
}

// Handle processes one delivery from cfg.Queue and settles it, for callers
// that run their own consume loop.
func Handle(ctx context.Context, cfg Config, d amqp.Delivery) consumer.Decision {
	m := toMessage(cfg.Queue, d)
	dec := cfg.Processor.Process(context.WithoutCancel(ctx), m)
	var err error
	switch dec.Action {
	case consumer.ActionAck:
		err = d.Ack(false)
	case consumer.ActionDeadLetter:
		err = d.Nack(false, false)
	default:
		wait(ctx, dec.Delay)
		err = d.Nack(false, true)
	}
	if err != nil && cfg.Logger != nil {
		cfg.Logger.WarnContext(ctx, "amqpconsumer: settle failed; the message will be redelivered",
			"action", dec.Action.String(), "queue", cfg.Queue, "err", err)
	}
	return dec
}

// requeue hands back deliveries that arrived after shutdown began, until
// the cancelled consumer's channel closes. Undrained deliveries would also
// block amqp091's Channel.Close.
func requeue(deliveries <-chan amqp.Delivery) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			_ = d.Nack(false, true)
		case <-t.C:
			return
		}
	}
}

// wait sleeps for d or until ctx ends (then the message is requeued at once).
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func toMessage(queue string, d amqp.Delivery) *consumer.Message {
	m := &consumer.Message{ID: d.MessageId, Source: queue, Subject: d.RoutingKey, Body: d.Body,
		Headers: map[string]string{}, Delivery: deliveryCount(d)}
	for k, v := range d.Headers {
		if s, ok := v.(string); ok {
			m.Headers[k] = s
		}
	}
	return m
}

// deliveryCount is 1 for a first delivery, x-delivery-count+1 on a quorum
// queue, and 0 (unknown) for a classic queue's redelivery.
func deliveryCount(d amqp.Delivery) int {
	switch n := d.Headers["x-delivery-count"].(type) {
	case int64:
		return int(n) + 1
	case int32:
		return int(n) + 1
	case int:
		return n + 1
	}
	if !d.Redelivered {
		return 1
	}
	return 0
}
