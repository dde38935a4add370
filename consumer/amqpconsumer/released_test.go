package amqpconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/amqpconsumer"
)

// TestReleasedMessageIsRedelivered: a handler that says nothing happened
// (idem.Release: the database was busy) frees the key, and the delivery is
// requeued, so RabbitMQ redelivers it and the effect runs then, once.
// Acked instead, the message would be gone with no effect: the only way
// for the effect to happen is the redelivery.
func TestReleasedMessageIsRedelivered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var tries, effects atomic.Int32
	r.run(t, r.processor(t, 0, func(context.Context, *consumer.Message) error {
		if tries.Add(1) == 1 {
			return idem.Release(errors.New("database busy"))
		}
		effects.Add(1)
		return nil
	}), 1)
	r.publish(t, "released-1", `{}`)
	eventually(t, "the released message redelivered and its effect run", func() bool { return effects.Load() == 1 })
	eventually(t, "queue empty", func() bool { return r.count(t, r.queue) == 0 })
	if effects.Load() != 1 || tries.Load() != 2 {
		t.Fatalf("effect ran %d times in %d deliveries; want once, on the redelivery", effects.Load(), tries.Load())
	}
}

// TestProcessedMessageIsAckedNotRequeued: a message whose outcome is
// recorded is acked, so RabbitMQ drops it. Requeued instead, it would come
// back for ever (each time a replay). The delivery is taken with basic.get
// and settled on the same channel, and a second basic.get on that channel
// (which the broker handles after the settlement) must find the queue
// empty: no timing decides it. (A passive declare counts only ready
// messages, so a requeue loop can look like an empty queue.)
func TestProcessedMessageIsAckedNotRequeued(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var effects atomic.Int32
	p := r.processor(t, 0, func(context.Context, *consumer.Message) error { effects.Add(1); return nil })
	r.publish(t, "acked-1", `{}`)
	ch := r.channel(t)
	var d amqp.Delivery
	eventually(t, "the message to arrive", func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(r.queue, false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	cfg := amqpconsumer.Config{Processor: p, Queue: r.queue}
	if dec := amqpconsumer.Handle(context.Background(), cfg, d); dec.Action != consumer.ActionAck || effects.Load() != 1 {
		t.Fatalf("first delivery: %+v, %d effects", dec, effects.Load())
	}
	if again, ok, err := ch.Get(r.queue, false); err != nil || ok {
		t.Fatalf("after the ack the queue still delivers %q (%v, %v): the processed message was requeued", again.MessageId, ok, err)
	}
}
