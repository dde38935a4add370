package natsconsumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/natsconsumer"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// effects counts effects per key.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) add(k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[k]++
}

func (e *effects) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.n {
		out[k] = v
	}
	return out
}

type rig struct {
	*env
	engine   *idem.Engine
	store    *memstore.Store
	logs     *syncBuf
	mismatch atomic.Int32
}

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

func newRig(t *testing.T, dup time.Duration) *rig {
	// A consumer or store that blocks fails the test binary with every
	// goroutine's stack, instead of hanging until go test's timeout.
	storetest.Deadline(t, 2*time.Minute)
	r := &rig{env: newEnv(t, dup), store: memstore.New(), logs: &syncBuf{}}
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome && ev.Outcome == idem.OutcomeMismatch {
			r.mismatch.Add(1)
		}
	})
	e, err := idem.New(r.store, idem.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	r.engine = e
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			t.Logf("logs:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *rig) processor(t *testing.T, h consumer.Handler) *consumer.Processor {
	t.Helper()
	p, err := consumer.New(consumer.Config{Engine: r.engine, RetryDelay: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))}, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a natsconsumer over cons until the test ends.
func (r *rig) run(t *testing.T, p *consumer.Processor, cons jetstream.Consumer, hb time.Duration) {
	t.Helper()
	c, err := natsconsumer.New(r.js, natsconsumer.Config{Processor: p, DeadLetterSubject: r.dlq, Workers: 4, Heartbeat: hb,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, cons) }()
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
	if _, err := natsconsumer.Publish(ctx, r.js, r.prefix+".orders", idem.Key(key), []byte(body), nil); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 20ms for up to 20s.
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

func drained(t *testing.T, cons jetstream.Consumer) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := cons.Info(ctx)
		if err == nil && os.Getenv("IDEM_DEBUG") != "" {
			t.Logf("pending %d ackpending %d waiting %d redelivered %d delivered %d", info.NumPending, info.NumAckPending, info.NumWaiting, info.NumRedelivered, info.Delivered.Consumer)
		}
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}
}

// Effects that ran but were never acked are redelivered by JetStream; the
// redeliveries are acked without running the effect again.
func TestRedeliveryOfRecordedMessageIsAckedWithoutRunning(t *testing.T) {
	t.Parallel()
	r := newRig(t, 0)
	cons := r.consumer(t, time.Second)
	const n = 20
	for i := range n {
		r.publish(t, fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"order":%d}`, i))
	}
	var fx effects
	p := r.processor(t, func(_ context.Context, m *consumer.Message) error { fx.add(m.ID); return nil })
	// A consumer that runs the effects and dies before acking any of them.
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for msg := range batch.Messages() {
		m := &consumer.Message{ID: msg.Headers().Get(jetstream.MsgIDHeader), Source: r.name + "/billing", Body: msg.Data(), Delivery: 1}
		if d := p.Process(context.Background(), m); d.Action != consumer.ActionAck {
			t.Fatalf("first processing: %+v", d)
		}
		got++
	}
	if got != n {
		t.Fatalf("fetched %d of %d", got, n)
	}
	r.run(t, p, cons, 0)
	eventually(t, "redeliveries acked", drained(t, cons))
	for k, v := range fx.snapshot() {
		if v != 1 {
			t.Errorf("%s: effect ran %d times", k, v)
		}
	}
	if len(fx.snapshot()) != n {
		t.Fatalf("%d effects, want %d", len(fx.snapshot()), n)
	}
	info, _ := cons.Info(context.Background())
	if info.Delivered.Consumer < 2*n {
		t.Fatalf("only %d deliveries: the redeliveries did not happen, the test proves nothing", info.Delivered.Consumer)
	}
}

// The same Nats-Msg-Id with another payload (published after the stream's
// duplicate window, where JetStream no longer drops it) is dead-lettered as
// a mismatch, logged and counted — never acked as a duplicate.
func TestSameIDOtherPayloadIsMismatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, 100*time.Millisecond)
	cons := r.consumer(t, 5*time.Second)
	var fx effects
	r.run(t, r.processor(t, func(_ context.Context, m *consumer.Message) error { fx.add(string(m.Body)); return nil }), cons, 0)
	r.publish(t, "evt-1", `{"amount":5}`)
	eventually(t, "first processed", func() bool { return len(fx.snapshot()) == 1 })
	time.Sleep(300 * time.Millisecond) // past the stream's duplicate window
	r.publish(t, "evt-1", `{"amount":500}`)
	dl := r.deadLetters(t, 1)
	if got := dl[0].Headers().Get(natsconsumer.HeaderReason); got != string(consumer.ReasonMismatch) {
		t.Fatalf("dead letter reason %q", got)
	}
	if string(dl[0].Data()) != `{"amount":500}` {
		t.Fatalf("dead letter body %q", dl[0].Data())
	}
	eventually(t, "drained", drained(t, cons))
	if fx.snapshot()[`{"amount":500}`] != 0 {
		t.Fatal("mismatched payload ran")
	}
	if r.mismatch.Load() != 1 {
		t.Fatalf("mismatch events: %d", r.mismatch.Load())
	}
	if !bytes.Contains([]byte(r.logs.String()), []byte("reason=mismatch")) {
		t.Fatalf("no mismatch log: %s", r.logs.String())
	}
}

func TestHandlerFailureIsDeadLetteredWithRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t, 0)
	cons := r.consumer(t, 5*time.Second)
	var runs atomic.Int32
	r.run(t, r.processor(t, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		return errors.New("account closed")
	}), cons, 0)
	r.publish(t, "evt-9", `{}`)
	dl := r.deadLetters(t, 1)
	if dl[0].Headers().Get(natsconsumer.HeaderReason) != string(consumer.ReasonFailed) ||
		dl[0].Headers().Get(natsconsumer.HeaderError) != "account closed" {
		t.Fatalf("dead letter headers %v", dl[0].Headers())
	}
	rec, err := r.store.Get(context.Background(), r.name+"/billing", "evt-9")
	if err != nil || rec.State != idem.StateFailed {
		t.Fatalf("record %+v, %v", rec, err)
	}
	eventually(t, "drained", drained(t, cons))
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

// An effect longer than AckWait: InProgress heartbeats keep JetStream from
// redelivering it.
func TestInProgressCoversEffectLongerThanAckWait(t *testing.T) {
	t.Parallel()
	r := newRig(t, 0)
	cons := r.consumer(t, time.Second)
	var runs atomic.Int32
	r.run(t, r.processor(t, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		time.Sleep(2500 * time.Millisecond)
		return nil
	}), cons, 0)
	r.publish(t, "slow-1", `{}`)
	eventually(t, "drained", drained(t, cons))
	info, _ := cons.Info(context.Background())
	if info.Delivered.Consumer != 1 || runs.Load() != 1 {
		t.Fatalf("deliveries %d, runs %d; want 1, 1 (InProgress must prevent redelivery)", info.Delivered.Consumer, runs.Load())
	}
}

// Without heartbeats the message is redelivered while the effect still runs:
// the duplicate is NAKed (in flight), the late ack is not what decides, and
// the effect runs once.
func TestLateAckDoesNotDecideTheRecordDoes(t *testing.T) {
	t.Parallel()
	r := newRig(t, 0)
	cons := r.consumer(t, time.Second)
	var runs atomic.Int32
	r.run(t, r.processor(t, func(context.Context, *consumer.Message) error {
		runs.Add(1)
		time.Sleep(2500 * time.Millisecond)
		return nil
	}), cons, -1)
	r.publish(t, "slow-2", `{}`)
	eventually(t, "drained", drained(t, cons))
	info, _ := cons.Info(context.Background())
	if info.Delivered.Consumer < 2 {
		t.Fatalf("no redelivery happened (%d deliveries); the test proves nothing", info.Delivered.Consumer)
	}
	if runs.Load() != 1 {
		t.Fatalf("effect ran %d times", runs.Load())
	}
}
