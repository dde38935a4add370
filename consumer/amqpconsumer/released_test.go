package amqpconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
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
