package natsconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
)

// TestReleasedMessageIsRedelivered: a handler that says nothing happened
// (idem.Release: the database was busy) frees the key, and the message is
// Nak'ed with a delay, so JetStream redelivers it and the effect runs then,
// once. Acked instead, the message would be gone with no effect: the only
// way for the effect to happen is the redelivery.
func TestReleasedMessageIsRedelivered(t *testing.T) {
	t.Parallel()
	r := newRig(t, 0)
	cons := r.consumer(t, time.Second)
	var tries atomic.Int32
	var fx effects
	p := r.processor(t, func(_ context.Context, m *consumer.Message) error {
		if tries.Add(1) == 1 {
			return idem.Release(errors.New("database busy"))
		}
		fx.add(m.ID)
		return nil
	})
	r.run(t, p, cons, 0)
	r.publish(t, "order-released", `{"order":1}`)
	eventually(t, "the released message redelivered and its effect run", func() bool { return fx.snapshot()["order-released"] == 1 })
	eventually(t, "the redelivery acked", drained(t, cons))
	if n := fx.snapshot()["order-released"]; n != 1 || tries.Load() != 2 {
		t.Fatalf("effect ran %d times in %d deliveries; want once, on the redelivery", n, tries.Load())
	}
}
