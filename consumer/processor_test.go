package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/memstore"
)

type fixture struct {
	store    *memstore.Store
	engine   *idem.Engine
	logs     *bytes.Buffer
	mu       sync.Mutex
	outcomes []idem.Outcome
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(), logs: new(bytes.Buffer)}
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome {
			f.mu.Lock()
			f.outcomes = append(f.outcomes, ev.Outcome)
			f.mu.Unlock()
		}
	})
	e, err := idem.New(f.store, idem.Config{Observer: obs, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.engine = e
	t.Cleanup(func() { e.Close(); f.store.Close() })
	return f
}

func (f *fixture) processor(t *testing.T, cfg consumer.Config, h consumer.Handler) *consumer.Processor {
	t.Helper()
	cfg.Engine = f.engine
	var mu sync.Mutex
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, f.logs}, nil))
	p, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) saw(o idem.Outcome) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.outcomes {
		if x == o {
			return true
		}
	}
	return false
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func msg(id, body string, delivery int) *consumer.Message {
	return &consumer.Message{ID: id, Source: "orders/billing", Subject: "orders.created", Body: []byte(body), Delivery: delivery}
}

func counting(n *atomic.Int32, err error) consumer.Handler {
	return func(context.Context, *consumer.Message) error {
		n.Add(1)
		return err
	}
}

func TestFirstDeliveryThenRedeliveryRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, counting(&n, nil))
	ctx := context.Background()
	d := p.Process(ctx, msg("m1", `{"amount":5}`, 1))
	if d.Action != consumer.ActionAck || d.Outcome != idem.OutcomeFirst {
		t.Fatalf("first delivery: %+v", d)
	}
	d = p.Process(ctx, msg("m1", `{"amount":5}`, 2))
	if d.Action != consumer.ActionAck || d.Outcome != idem.OutcomeReplay {
		t.Fatalf("redelivery: %+v", d)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times, want 1", n.Load())
	}
	rec, err := f.store.Get(ctx, "orders/billing", "m1")
	if err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("record = %+v, %v; want succeeded", rec, err)
	}
}

func TestHandlerFailureIsRecordedAndDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, counting(&n, errors.New("card declined")))
	for i := 1; i <= 3; i++ {
		d := p.Process(context.Background(), msg("m1", "x", i))
		if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonFailed {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		if d.Record == nil || d.Record.State != idem.StateFailed || string(d.Record.Result) != "card declined" {
			t.Fatalf("delivery %d: record %+v", i, d.Record)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("failed handler ran %d times, want 1 (redeliveries replay the failure)", n.Load())
	}
}

func TestReleasedIsRetriedThenGivenUpWithRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{MaxDeliveries: 3, RetryDelay: 7 * time.Second},
		counting(&n, idem.Release(errors.New("downstream busy"))))
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		d := p.Process(ctx, msg("m1", "x", i))
		if d.Action != consumer.ActionRetry || d.Delay != 7*time.Second || d.Outcome != idem.OutcomeReleased {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		if _, err := f.store.Get(ctx, "orders/billing", "m1"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("delivery %d: released key still has a record: %v", i, err)
		}
	}
	d := p.Process(ctx, msg("m1", "x", 3))
	if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonFailed {
		t.Fatalf("last delivery: %+v", d)
	}
	rec, err := f.store.Get(ctx, "orders/billing", "m1")
	if err != nil || rec.State != idem.StateFailed || !strings.Contains(string(rec.Result), "gave up after 3 deliveries") {
		t.Fatalf("poison record = %+v, %v", rec, err)
	}
	if n.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", n.Load())
	}
}

func TestMismatchIsReportedNotAcked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, counting(&n, nil))
	ctx := context.Background()
	p.Process(ctx, msg("m1", `{"amount":5}`, 1))
	d := p.Process(ctx, msg("m1", `{"amount":500}`, 1))
	if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonMismatch || !errors.Is(d.Err, idem.ErrMismatch) {
		t.Fatalf("mismatch: %+v", d)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times", n.Load())
	}
	if !f.saw(idem.OutcomeMismatch) {
		t.Fatal("no mismatch event reached the observer")
	}
	if !strings.Contains(f.logs.String(), "reason=mismatch") {
		t.Fatalf("no mismatch in the log: %s", f.logs)
	}
}

func TestInFlightDuplicateIsRetriedNotRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	p := f.processor(t, consumer.Config{}, func(context.Context, *consumer.Message) error {
		n.Add(1)
		close(started)
		<-release
		return nil
	})
	ctx := context.Background()
	first := make(chan consumer.Decision)
	go func() { first <- p.Process(ctx, msg("m1", "x", 1)) }()
	<-started
	d := p.Process(ctx, msg("m1", "x", 2))
	if d.Action != consumer.ActionRetry || d.Outcome != idem.OutcomeConflict || d.Delay <= 0 {
		t.Fatalf("in-flight duplicate: %+v", d)
	}
	close(release)
	if d := <-first; d.Action != consumer.ActionAck {
		t.Fatalf("first: %+v", d)
	}
	if d := p.Process(ctx, msg("m1", "x", 3)); d.Action != consumer.ActionAck || d.Outcome != idem.OutcomeReplay {
		t.Fatalf("after: %+v", d)
	}
	if n.Load() != 1 {
		t.Fatalf("effect ran %d times", n.Load())
	}
}

func TestMissingKeyIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, counting(&n, nil))
	for _, id := range []string{"", "bad\nid"} {
		d := p.Process(context.Background(), msg(id, "x", 1))
		if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonInvalidKey {
			t.Fatalf("id %q: %+v", id, d)
		}
	}
	if n.Load() != 0 {
		t.Fatal("handler ran without a key")
	}
}

func TestUnknownIsParkedNotRerun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, counting(&n, idem.Unknown(errors.New("provider timed out"))))
	for i := 1; i <= 2; i++ {
		d := p.Process(context.Background(), msg("m1", "x", i))
		if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonUnknown {
			t.Fatalf("delivery %d: %+v", i, d)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("unknown effect re-ran: %d runs", n.Load())
	}
}

func TestPanicLeavesUnknownThenParks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{}, func(context.Context, *consumer.Message) error {
		n.Add(1)
		panic("boom")
	})
	d := p.Process(context.Background(), msg("m1", "x", 1))
	if d.Action != consumer.ActionRetry {
		t.Fatalf("panic: %+v", d)
	}
	d = p.Process(context.Background(), msg("m1", "x", 2))
	if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonUnknown {
		t.Fatalf("after panic: %+v", d)
	}
	if n.Load() != 1 {
		t.Fatalf("handler ran %d times after a panic", n.Load())
	}
}

// A consumer that died after its claim and before its effect leaves an
// in_progress record; after the lease the recovery hook finds the effect
// absent, releases, and the delivery runs the effect once.
func TestRecoverReleasesAbandonedClaimAndRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	m := msg("m1", "x", 2)
	// The dead consumer's claim, lease already over.
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := f.store.Claim(ctx, idem.ClaimParams{Scope: m.Source, Key: m.ID, Fingerprint: consumer.BodyFingerprint(m),
		AttemptID: "dead", Now: now.Add(-time.Minute), LeaseUntil: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	var effects atomic.Int32
	var asked atomic.Int32
	p := f.processor(t, consumer.Config{
		Recover: func(_ context.Context, _ *consumer.Message, rec idem.Record) (idem.Resolution, bool, error) {
			asked.Add(1)
			if rec.State != idem.StateUnknown {
				t.Errorf("recover saw state %s", rec.State)
			}
			if effects.Load() > 0 {
				return idem.Resolution{As: idem.StateSucceeded}, true, nil
			}
			return idem.Resolution{Release: true, Reason: "effect absent"}, true, nil
		},
	}, counting(&effects, nil))
	if d := p.Process(ctx, m); d.Action != consumer.ActionAck || d.Outcome != idem.OutcomeFirst {
		t.Fatalf("recovered delivery: %+v", d)
	}
	if d := p.Process(ctx, m); d.Action != consumer.ActionAck || d.Outcome != idem.OutcomeReplay {
		t.Fatalf("later delivery: %+v", d)
	}
	if effects.Load() != 1 || asked.Load() != 1 {
		t.Fatalf("effects %d, recover calls %d; want 1, 1", effects.Load(), asked.Load())
	}
}

func TestRecoverUndecidedParks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	p := f.processor(t, consumer.Config{
		Recover: func(context.Context, *consumer.Message, idem.Record) (idem.Resolution, bool, error) {
			return idem.Resolution{}, false, nil
		},
	}, counting(&n, idem.Unknown(errors.New("lost"))))
	d := p.Process(context.Background(), msg("m1", "x", 1))
	if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonUnknown {
		t.Fatalf("%+v", d)
	}
	if n.Load() != 1 {
		t.Fatalf("ran %d", n.Load())
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := consumer.New(consumer.Config{}, counting(new(atomic.Int32), nil)); err == nil {
		t.Fatal("New accepted a config without an engine")
	}
	f := newFixture(t)
	if _, err := consumer.New(consumer.Config{Engine: f.engine}, nil); err == nil {
		t.Fatal("New accepted a nil handler")
	}
	if _, err := consumer.New(consumer.Config{Engine: f.engine, RetryDelay: -1}, counting(new(atomic.Int32), nil)); err == nil {
		t.Fatal("New accepted a negative RetryDelay")
	}
}

// A ValueHandler's value is recorded with the outcome and handed back on
// every redelivery, without running the handler again.
func TestValueIsRecordedAndReplayed(t *testing.T) {
	f := newFixture(t)
	var runs atomic.Int32
	p, err := consumer.NewValue(consumer.Config{Engine: f.engine}, func(_ context.Context, m *consumer.Message) ([]byte, error) {
		runs.Add(1)
		return []byte("receipt-" + m.ID), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		d := p.Process(context.Background(), &consumer.Message{ID: "evt-1", Source: "q", Body: []byte(`{}`)})
		if d.Action != consumer.ActionAck || string(d.Value) != "receipt-evt-1" {
			t.Fatalf("delivery %d: %+v, value %q", i+1, d, d.Value)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}
