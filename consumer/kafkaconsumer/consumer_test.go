package kafkaconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/kafkaconsumer"
)

// Duplicate deliveries: every key produced once, half of them produced
// again (a re-publish with the same Idem-Key header), then the group's
// offsets reset to the start and the topic consumed again by a fresh
// member. Each key's effect happens once; the second pass commits every
// record to the end without running a single effect (replays).
func TestDuplicatesAndOffsetResetRunEachEffectOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const n = 12
	for i := range n {
		r.produce(t, int32(i%2), fmt.Sprintf("pay-%02d", i), fmt.Sprintf(`{"amount":%d}`, i))
	}
	for i := 0; i < n; i += 2 {
		r.produce(t, int32(i%2), fmt.Sprintf("pay-%02d", i), fmt.Sprintf(`{"amount":%d}`, i))
	}
	var fx effects
	var runs atomic.Int32
	h := func(_ context.Context, m *consumer.Message) error { runs.Add(1); fx.add(m.ID); return nil }
	m := r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "the first pass committed", r.drained(t, "billing"))
	m.stop(t)
	first := runs.Load()

	r.resetOffsets(t, "billing")
	if got := r.committed(t, "billing"); got[0] != 0 || got[1] != 0 {
		t.Fatalf("offsets after the reset: %v", got)
	}
	r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "the replayed pass committed", r.drained(t, "billing"))
	for i := range n {
		if k := fmt.Sprintf("pay-%02d", i); fx.get(k) != 1 {
			t.Errorf("%s: effect ran %d times, want 1", k, fx.get(k))
		}
	}
	if first != n || runs.Load() != n {
		t.Fatalf("handler ran %d times in the first pass, %d in all; want %d and %d", first, runs.Load(), n, n)
	}
}

// With OffsetKey, an offset reset replays (the stored record keeps its
// offset), but the same event produced twice is two keys: the weaker
// choice the docs describe.
func TestOffsetKeyCoversRedeliveryNotRepublish(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.produce(t, 0, "", `{"event":"a"}`)
	r.produce(t, 0, "", `{"event":"a"}`) // re-published: a new offset
	var fx effects
	h := func(_ context.Context, m *consumer.Message) error { fx.add(string(m.Body)); return nil }
	m := r.join(t, "audit", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{OffsetKey: true})
	eventually(t, "committed", r.drained(t, "audit"))
	m.stop(t)
	r.resetOffsets(t, "audit")
	r.join(t, "audit", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{OffsetKey: true})
	eventually(t, "committed again", r.drained(t, "audit"))
	if got := fx.get(`{"event":"a"}`); got != 2 {
		t.Fatalf("effects: %d; want 2 (one per offset, none for the reset)", got)
	}
	rec, err := r.store.Get(context.Background(), "audit/"+topic, topic+":0:1")
	if err != nil || rec.State != idem.StateSucceeded {
		t.Fatalf("record of %s:0:1: %+v, %v", topic, rec, err)
	}
}

// An in-flight duplicate: another process holds the key's claim (its
// effect still running) when the record arrives. The record is retried,
// not run and not skipped: while the claim is held, neither it nor the
// record behind it in the partition is processed, and the partition's
// committed offset does not pass it. Once the holder records its outcome,
// the record replays and the partition moves on.
func TestInFlightDuplicateIsPausedNotSkipped(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var fx effects
	h := func(_ context.Context, m *consumer.Message) error { fx.add(m.ID); return nil }
	holder := r.engine(t, nil)
	started, finish := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		_, err := holder.DoBytes(context.Background(), idem.Request{Scope: "billing/" + topic, Key: "pay-held",
			Fingerprint: idem.NewFingerprint([]byte(`{"amount":1}`)), Operation: "consume"},
			func(context.Context, *idem.Attempt) ([]byte, error) {
				close(started)
				<-finish
				fx.add("pay-held")
				return nil, nil
			})
		held <- err
	}()
	<-started
	off := r.produce(t, 0, "pay-held", `{"amount":1}`)
	r.produce(t, 0, "pay-next", `{"amount":2}`)
	var conflicts atomic.Int32
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome && ev.Outcome == idem.OutcomeConflict && ev.Key == "pay-held" {
			conflicts.Add(1)
		}
	})
	r.join(t, "billing", r.processor(t, r.engine(t, obs), h), kafkaconsumer.Config{})
	eventually(t, "the duplicate retried as in flight", func() bool { return conflicts.Load() >= 2 })
	for range 10 { // a second of polls and commits
		if c, ok := r.committed(t, "billing")[0]; ok && c > off {
			t.Fatalf("committed offset %d passes the in-flight record at %d", c, off)
		}
		if fx.get("pay-next") != 0 {
			t.Fatal("the record behind the in-flight duplicate was processed before it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(finish)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	eventually(t, "committed", r.drained(t, "billing"))
	if fx.get("pay-held") != 1 || fx.get("pay-next") != 1 {
		t.Fatalf("effects: held %d, next %d; want 1, 1", fx.get("pay-held"), fx.get("pay-next"))
	}
}

// A failing handler: recorded failed, produced to the dead-letter topic
// with its key, value, headers and the Idem-* headers, committed past; the
// record behind it is processed; an offset reset does not run it again.
func TestFailureIsDeadLetteredWithItsRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	var fx effects
	h := func(_ context.Context, m *consumer.Message) error {
		if m.ID == "pay-poison" {
			runs.Add(1)
			return errors.New("account closed")
		}
		fx.add(m.ID)
		return nil
	}
	off := r.produce(t, 1, "pay-poison", `{"amount":666}`)
	r.produce(t, 1, "pay-ok", `{"amount":1}`)
	m := r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "committed", r.drained(t, "billing"))
	dl := r.deadLetters(t, 1)[0]
	hdr := map[string]string{}
	for _, h := range dl.Headers {
		hdr[h.Key] = string(h.Value)
	}
	if string(dl.Value) != `{"amount":666}` || hdr[kafkaconsumer.DefaultKeyHeader] != "pay-poison" ||
		hdr[kafkaconsumer.HeaderReason] != string(consumer.ReasonFailed) || hdr[kafkaconsumer.HeaderError] != "account closed" ||
		hdr[kafkaconsumer.HeaderState] != string(idem.StateFailed) || hdr[kafkaconsumer.HeaderScope] != "billing/"+topic ||
		hdr[kafkaconsumer.HeaderTopic] != topic || hdr[kafkaconsumer.HeaderPartition] != "1" || hdr[kafkaconsumer.HeaderOffset] != fmt.Sprint(off) {
		t.Fatalf("dead letter: value %q, headers %v", dl.Value, hdr)
	}
	rec, err := r.store.Get(context.Background(), "billing/"+topic, "pay-poison")
	if err != nil || rec.State != idem.StateFailed {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if fx.get("pay-ok") != 1 {
		t.Fatalf("the record behind the dead letter: %d effects", fx.get("pay-ok"))
	}
	m.stop(t)
	r.resetOffsets(t, "billing")
	r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "committed again", r.drained(t, "billing"))
	if runs.Load() != 1 {
		t.Fatalf("failing handler ran %d times; want 1 (the failure is recorded and replayed)", runs.Load())
	}
}

// An outcome the handler cannot know (idem.Unknown: a timeout at the
// provider) goes to the reconciliation path: parked on the dead-letter
// topic with reason unknown, and never back into the handler, even after
// an offset reset.
func TestUnknownIsParkedNotRerun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var runs atomic.Int32
	h := func(context.Context, *consumer.Message) error {
		runs.Add(1)
		return idem.Unknown(errors.New("provider timed out"))
	}
	r.produce(t, 0, "pay-unknown", `{"amount":5}`)
	m := r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "committed", r.drained(t, "billing"))
	m.stop(t)
	r.resetOffsets(t, "billing")
	r.join(t, "billing", r.processor(t, r.engine(t, nil), h), kafkaconsumer.Config{})
	eventually(t, "committed again", r.drained(t, "billing"))
	for _, dl := range r.deadLetters(t, 2) {
		for _, hd := range dl.Headers {
			if hd.Key == kafkaconsumer.HeaderReason && string(hd.Value) != string(consumer.ReasonUnknown) {
				t.Fatalf("dead letter reason %q", hd.Value)
			}
		}
	}
	rec, err := r.store.Get(context.Background(), "billing/"+topic, "pay-unknown")
	if err != nil || rec.State != idem.StateUnknown {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times; want 1", runs.Load())
	}
}

// A record still waiting to be retried (its handler released: nothing
// happened) when the member stops is not committed past: the next member
// receives it and runs its effect, once. Committed past, it would be lost.
func TestRecordWaitingForRetryIsNotCommittedPast(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var busy atomic.Bool
	busy.Store(true)
	var tries atomic.Int32
	var fx effects
	h := func(_ context.Context, m *consumer.Message) error {
		if busy.Load() {
			tries.Add(1)
			return idem.Release(errors.New("database busy"))
		}
		fx.add(m.ID)
		return nil
	}
	e := r.engine(t, nil)
	p, err := consumer.New(consumer.Config{Engine: e, RetryDelay: time.Hour, Logger: r.logger()}, h)
	if err != nil {
		t.Fatal(err)
	}
	r.produce(t, 0, "pay-busy", `{"amount":7}`)
	m := r.join(t, "billing", p, kafkaconsumer.Config{})
	eventually(t, "the handler released", func() bool { return tries.Load() > 0 })
	m.stop(t)
	if c, ok := r.committed(t, "billing")[0]; ok && c > 0 {
		t.Fatalf("committed offset %d passes the unsettled record at 0", c)
	}
	busy.Store(false)
	r.join(t, "billing", r.processor(t, e, h), kafkaconsumer.Config{})
	eventually(t, "committed", r.drained(t, "billing"))
	if fx.get("pay-busy") != 1 {
		t.Fatalf("effect ran %d times; want 1", fx.get("pay-busy"))
	}
}

// A rebalance in the middle of an effect: member A holds both partitions
// and is inside the handler of each partition's first record when member B
// joins. The partition that moves is revoked from A while its handler
// runs; A finishes that record, records its outcome and commits it before
// the partition moves, so B starts after it: B never receives the record
// whose effect A ran (no second delivery, no in-flight conflict), and
// receives the record behind it. Every effect runs once.
func TestRebalanceMidEffectRunsOnceAndCommitsAfterRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for p := int32(0); p < 2; p++ {
		r.produce(t, p, fmt.Sprintf("pay-%d-a", p), `{"amount":1}`)
		r.produce(t, p, fmt.Sprintf("pay-%d-b", p), `{"amount":2}`)
	}
	var fx effects
	var inside sync.WaitGroup
	inside.Add(2)
	release := make(chan struct{})
	ha := func(_ context.Context, m *consumer.Message) error {
		if strings.HasSuffix(m.ID, "-a") {
			inside.Done()
			<-release
		}
		fx.add(m.ID)
		return nil
	}
	r.join(t, "billing", r.processor(t, r.engine(t, nil), ha), kafkaconsumer.Config{})
	inside.Wait()

	// B's engine reports every event it sees, by key.
	var mu sync.Mutex
	seen := map[string][]idem.Outcome{}
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome {
			mu.Lock()
			seen[ev.Key] = append(seen[ev.Key], ev.Outcome)
			mu.Unlock()
		}
	})
	hb := func(_ context.Context, m *consumer.Message) error { fx.add(m.ID); return nil }
	r.join(t, "billing", r.processor(t, r.engine(t, obs), hb), kafkaconsumer.Config{})
	eventually(t, "a partition revoked from A mid-effect", func() bool {
		return strings.Contains(r.logs.String(), "partitions revoked; finishing the record in hand")
	})
	time.Sleep(200 * time.Millisecond) // let B try to fetch the moving partition early
	close(release)
	eventually(t, "committed", r.drained(t, "billing"))
	for p := 0; p < 2; p++ {
		for _, s := range []string{"a", "b"} {
			if k := fmt.Sprintf("pay-%d-%s", p, s); fx.get(k) != 1 {
				t.Errorf("%s: effect ran %d times, want 1", k, fx.get(k))
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for p := 0; p < 2; p++ {
		if o := seen[fmt.Sprintf("pay-%d-a", p)]; len(o) > 0 {
			t.Errorf("B received pay-%d-a, whose effect A was running: %v", p, o)
		}
	}
	if len(seen) == 0 {
		t.Fatal("B received nothing: no partition moved, the test proves nothing")
	}
}
