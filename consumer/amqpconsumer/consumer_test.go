package amqpconsumer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/amqpconsumer"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type rig struct {
	conn     *amqp.Connection
	queue    string
	pub      *amqpconsumer.Publisher
	store    *memstore.Store
	engine   *idem.Engine
	logs     *syncBuf
	mismatch atomic.Int32
	replays  atomic.Int32
}

func newRig(t *testing.T) *rig {
	t.Helper()
	// A consumer or store that blocks fails the test binary with every
	// goroutine's stack, instead of hanging until go test's timeout.
	storetest.Deadline(t, 2*time.Minute)
	url := testenv.AMQP.Need(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	r := &rig{conn: conn, queue: "idemt." + hex.EncodeToString(b[:]), store: memstore.New(), logs: &syncBuf{}}
	ch := r.channel(t)
	if err := amqpconsumer.DeclareQueue(ch, amqpconsumer.QueueSpec{Queue: r.queue}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.QueueDelete(r.queue, false, false, false)
		_, _ = c.QueueDelete(r.queue+".dlq", false, false, false)
		_ = c.ExchangeDelete(r.queue+".dlx", false, false)
	})
	if r.pub, err = amqpconsumer.NewPublisher(r.channel(t)); err != nil {
		t.Fatal(err)
	}
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind != idem.EventOutcome {
			return
		}
		switch ev.Outcome {
		case idem.OutcomeMismatch:
			r.mismatch.Add(1)
		case idem.OutcomeReplay:
			r.replays.Add(1)
		}
	})
	if r.engine, err = idem.New(r.store, idem.Config{Observer: obs}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.engine.Close() })
	return r
}

func (r *rig) channel(t *testing.T) *amqp.Channel {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(ch, r.conn) })
	return ch
}

// closeWithin closes ch, or, when the broker does not answer the close
// within 10 s (amqp091's Close has no timeout), the whole connection, so a
// slow broker cannot hang the suite's cleanup.
func closeWithin(ch *amqp.Channel, conn *amqp.Connection) {
	done := make(chan struct{})
	go func() { ch.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = conn.CloseDeadline(time.Now().Add(5 * time.Second))
	}
}

func (r *rig) processor(t *testing.T, max int, h consumer.Handler) *consumer.Processor {
	t.Helper()
	p, err := consumer.New(consumer.Config{Engine: r.engine, RetryDelay: 50 * time.Millisecond, MaxDeliveries: max,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))}, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *rig) run(t *testing.T, p *consumer.Processor, workers int) {
	t.Helper()
	ch := r.channel(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- amqpconsumer.Run(ctx, ch, amqpconsumer.Config{Processor: p, Queue: r.queue, Workers: workers})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func (r *rig) publish(t *testing.T, key, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.pub.Publish(ctx, "", r.queue, idem.Key(key), amqp.Publishing{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// count returns (ready+unacked) messages in q, via a passive declare.
func (r *rig) count(t *testing.T, q string) int {
	t.Helper()
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	info, err := ch.QueueDeclarePassive(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// deadLetter gets one message from the dead-letter queue.
func (r *rig) deadLetter(t *testing.T) amqp.Delivery {
	t.Helper()
	ch := r.channel(t)
	for i := 0; i < 500; i++ {
		d, ok, err := ch.Get(r.queue+".dlq", true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no dead letter arrived")
	return amqp.Delivery{}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A consumer ran the effects and its channel closed before acking: RabbitMQ
// redelivers every message, and the redeliveries are acked without running.
func TestRedeliveryOfRecordedMessageIsAckedWithoutRunning(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const n = 10
	for i := range n {
		r.publish(t, fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"order":%d}`, i))
	}
	var runs atomic.Int32
	p := r.processor(t, 0, func(context.Context, *consumer.Message) error { runs.Add(1); return nil })
	ch, err := r.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		d, ok, err := ch.Get(r.queue, false)
		if err != nil || !ok {
			t.Fatalf("get %d: %v %v", i, ok, err)
		}
		m := &consumer.Message{ID: d.MessageId, Source: r.queue, Body: d.Body, Delivery: 1}
		if dec := p.Process(context.Background(), m); dec.Action != consumer.ActionAck {
			t.Fatalf("%+v", dec)
		}
	}
	ch.Close() // dies before acking: all n are requeued
	var redelivered atomic.Int32
	p2 := r.processor(t, 0, func(context.Context, *consumer.Message) error { runs.Add(1); return nil })
	ch2 := r.channel(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deliveries, err := ch2.ConsumeWithContext(ctx, r.queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := amqpconsumer.Config{Processor: p2, Queue: r.queue}
	for i := 0; i < n; i++ {
		d := <-deliveries
		if d.Redelivered {
			redelivered.Add(1)
		}
		if dec := amqpconsumer.Handle(ctx, cfg, d); dec.Action != consumer.ActionAck || dec.Outcome != idem.OutcomeReplay {
			t.Fatalf("redelivery: %+v", dec)
		}
	}
	if runs.Load() != n || redelivered.Load() != n {
		t.Fatalf("runs %d, redelivered %d; want %d, %d", runs.Load(), redelivered.Load(), n, n)
	}
	eventually(t, "queue empty", func() bool { return r.count(t, r.queue) == 0 })
}

// RabbitMQ does no deduplication: the same message-id with another payload
// reaches the consumer, which dead-letters it as a mismatch.
func TestSameIDOtherPayloadIsMismatch(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	r.run(t, r.processor(t, 0, func(context.Context, *consumer.Message) error { runs.Add(1); return nil }), 1)
	r.publish(t, "evt-1", `{"amount":5}`)
	r.publish(t, "evt-1", `{"amount":500}`)
	d := r.deadLetter(t)
	if string(d.Body) != `{"amount":500}` || d.MessageId != "evt-1" {
		t.Fatalf("dead letter %q %q", d.MessageId, d.Body)
	}
	if runs.Load() != 1 || r.mismatch.Load() != 1 {
		t.Fatalf("runs %d, mismatch events %d", runs.Load(), r.mismatch.Load())
	}
	if !bytes.Contains([]byte(r.logs.String()), []byte("reason=mismatch")) {
		t.Fatalf("no mismatch log: %s", r.logs.String())
	}
}

func TestFailureIsRecordedAndDeadLettered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	r.run(t, r.processor(t, 0, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		return errors.New("account closed")
	}), 1)
	r.publish(t, "evt-2", `{}`)
	d := r.deadLetter(t)
	if d.MessageId != "evt-2" {
		t.Fatalf("dead letter %q", d.MessageId)
	}
	rec, err := r.store.Get(context.Background(), r.queue, "evt-2")
	if err != nil || rec.State != idem.StateFailed || runs.Load() != 1 {
		t.Fatalf("record %+v, %v; runs %d", rec, err, runs.Load())
	}
}

// A handler that keeps saying "nothing happened, retry" is given up on at
// MaxDeliveries (counted by the quorum queue's x-delivery-count): recorded
// failed and dead-lettered, not an infinite loop.
func TestPoisonMessageEndsInDeadLetterWithRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	r.run(t, r.processor(t, 3, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		return idem.Release(errors.New("dependency down"))
	}), 1)
	r.publish(t, "poison-1", `{}`)
	if d := r.deadLetter(t); d.MessageId != "poison-1" {
		t.Fatalf("dead letter %q", d.MessageId)
	}
	rec, err := r.store.Get(context.Background(), r.queue, "poison-1")
	if err != nil || rec.State != idem.StateFailed {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", runs.Load())
	}
}

// Two copies of one message processed at once: the second is requeued while
// the first holds the claim, then acked as a replay; one effect.
func TestConcurrentDuplicateRunsOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	r.run(t, r.processor(t, 0, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		time.Sleep(300 * time.Millisecond)
		return nil
	}), 2)
	r.publish(t, "dup-1", `{}`)
	r.publish(t, "dup-1", `{}`)
	// An empty queue alone proves nothing: a passive declare counts ready
	// messages, and both copies can be in the workers' hands before either
	// handler starts. Wait for the one copy's outcome recorded and the other
	// copy answered as its replay.
	eventually(t, "one copy recorded, the other replayed, queue empty", func() bool {
		rec, err := r.store.Get(context.Background(), r.queue, "dup-1")
		return err == nil && rec.State == idem.StateSucceeded && r.replays.Load() >= 1 && r.count(t, r.queue) == 0
	})
	if runs.Load() != 1 || r.replays.Load() != 1 {
		t.Fatalf("effect ran %d times, %d replays; want 1, 1", runs.Load(), r.replays.Load())
	}
}
