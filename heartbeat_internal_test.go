package idem

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestBeatScheduleIsAHeap adds and removes attempts in random order and
// checks that the earliest beat is always at the top and every attempt
// knows its position.
func TestBeatScheduleIsAHeap(t *testing.T) {
	var s beatSchedule
	defer func() {
		if s.t != nil {
			s.t.Stop()
		}
	}()
	base := time.Now().Add(time.Hour)
	var in []*heartbeater
	check := func() {
		t.Helper()
		if len(s.h) != len(in) {
			t.Fatalf("schedule holds %d, want %d", len(s.h), len(in))
		}
		for i, h := range s.h {
			if h.idx != i {
				t.Fatalf("entry %d thinks it is at %d", i, h.idx)
			}
			if i > 0 && h.due.Before(s.h[(i-1)/2].due) {
				t.Fatalf("entry %d is due before its parent", i)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		if len(in) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(in))
			s.stop(in[i])
			if in[i].idx != -1 {
				t.Fatal("a removed entry keeps a position")
			}
			s.stop(in[i]) // twice is harmless
			in = append(in[:i], in[i+1:]...)
		} else {
			h := &heartbeater{idx: -1}
			s.add(h, base.Add(time.Duration(r.IntN(1000))*time.Millisecond))
			in = append(in, h)
		}
		check()
	}
}

// TestFinishCtxActsAsWithTimeoutWithoutCancel holds finishCtx to the
// behaviour of context.WithTimeout(context.WithoutCancel(parent), d).
func TestFinishCtxActsAsWithTimeoutWithoutCancel(t *testing.T) {
	type key struct{}
	parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	cancelParent(errors.New("caller gone"))

	var timers finishTimers
	c := finishCtx{timers: &timers}
	c.init(parent, time.Hour)
	if c.Err() != nil || context.Cause(&c) != nil {
		t.Fatalf("the caller's cancellation reached the finish context: %v, %v", c.Err(), context.Cause(&c))
	}
	if c.Value(key{}) != "v" {
		t.Fatal("the caller's values are lost")
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Fatalf("deadline %v, %v", d, ok)
	}
	select {
	case <-c.Done():
		t.Fatal("done before its deadline")
	default:
	}
	// A derived context follows it through AfterFunc, not a goroutine.
	child, cancelChild := context.WithCancel(&c)
	defer cancelChild()
	if len(c.funcs) != 1 {
		t.Fatalf("%d after-funcs registered, want 1", len(c.funcs))
	}
	c.cancel()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after cancel: %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed by cancel")
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a derived context did not end with it")
	}

	d := finishCtx{timers: &timers}
	d.init(context.Background(), 20*time.Millisecond)
	if d.Err() != nil {
		t.Fatal("ended early")
	}
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if !errors.Is(d.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(&d), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: %v, %v", d.Err(), context.Cause(&d))
	}

	// Err alone sees the deadline, with no timer.
	e := finishCtx{timers: &timers}
	e.init(context.Background(), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if !errors.Is(e.Err(), context.DeadlineExceeded) || e.joined {
		t.Fatalf("after the deadline: %v (on the timer's list: %v)", e.Err(), e.joined)
	}
	// A context derived after the end is cancelled at once.
	late, stop := context.WithCancel(&e)
	defer stop()
	select {
	case <-late.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived after the end is live")
	}
}

// The engine's one finishing timer ends every watched context at its
// deadline, in whatever order they joined, ends none early, takes a
// cancelled one off its list, and is disarmed when nothing is left on it
// (an armed timer would keep the engine reachable).
func TestFinishTimersEndEachContextAtItsDeadline(t *testing.T) {
	var timers finishTimers
	start := time.Now()
	// Joined in an order that is not their deadlines' order.
	offsets := []time.Duration{60, 20, 100, 40, 80}
	ctxs := make([]*finishCtx, len(offsets))
	for i, off := range offsets {
		c := &finishCtx{timers: &timers}
		c.initAt(context.Background(), off*time.Millisecond, start)
		c.Done()
		ctxs[i] = c
	}
	cancelled := &finishCtx{timers: &timers}
	cancelled.initAt(context.Background(), 50*time.Millisecond, start)
	cancelled.Done()
	cancelled.cancel()
	for i, c := range ctxs {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("context %d (deadline +%dms) never ended", i, offsets[i])
		}
		if ended := time.Since(start); ended < offsets[i]*time.Millisecond {
			t.Errorf("context %d ended after %v, before its deadline +%dms", i, ended, offsets[i])
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("context %d: %v, want DeadlineExceeded", i, c.Err())
		}
	}
	if !errors.Is(cancelled.Err(), context.Canceled) {
		t.Errorf("cancelled context: %v", cancelled.Err())
	}
	timers.mu.Lock()
	if timers.head != nil || timers.tail != nil {
		t.Fatal("contexts left on the list after they ended")
	}
	timers.mu.Unlock()
	// The last context on the list leaves by cancel, long before its
	// deadline: the timer must not stay armed for it.
	long := &finishCtx{timers: &timers}
	long.init(context.Background(), time.Hour)
	long.Done()
	long.cancel()
	timers.mu.Lock()
	defer timers.mu.Unlock()
	if !timers.at.IsZero() || timers.t.Stop() {
		t.Fatal("the timer is armed with nothing on its list")
	}
}

// Contexts watched, cancelled and timed out from many goroutines at once
// (run with -race): no deadlock between a context's lock and the list's,
// and every context ends.
func TestFinishTimersConcurrent(t *testing.T) {
	var timers finishTimers
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				c := &finishCtx{timers: &timers}
				c.init(context.Background(), time.Duration(i%3)*time.Millisecond)
				stop := context.AfterFunc(c, func() {})
				<-c.Done()
				if i%2 == 0 {
					c.cancel()
				}
				stop()
				if c.Err() == nil {
					t.Error("a context whose Done closed has no error")
					return
				}
			}
		}()
	}
	wg.Wait()
	timers.mu.Lock()
	defer timers.mu.Unlock()
	if timers.head != nil {
		t.Fatal("contexts left on the list")
	}
}

// TestCloseDisarmsAnIdleBeatTimer: an armed heartbeat timer holds its
// engine (and so the store and replay cache) reachable until it fires.
// Close stops it when no attempt is running, and leaves it armed while
// one is, so that a running attempt keeps its lease.
func TestCloseDisarmsAnIdleBeatTimer(t *testing.T) {
	newEngine := func() *Engine {
		e := &Engine{sync: &clockSync{}}
		e.flights.init(e)
		return e
	}

	e := newEngine()
	h := &heartbeater{idx: -1}
	e.beats.add(h, time.Now().Add(time.Hour))
	e.beats.stop(h)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e.beats.t.Stop() {
		t.Fatal("Close left the timer armed with no attempt running")
	}
	if !e.beats.at.IsZero() {
		t.Fatal("the schedule believes its timer is armed")
	}
	e.beats.add(h, time.Now().Add(time.Hour))
	if !e.beats.t.Stop() {
		t.Fatal("an attempt added after Close did not arm the timer")
	}

	e = newEngine()
	running := &heartbeater{idx: -1}
	e.beats.add(running, time.Now().Add(time.Hour))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !e.beats.t.Stop() {
		t.Fatal("Close disarmed the timer of a running attempt")
	}
}

// The first beat is due a third of the lease after the claim: a claim
// whose round trip was slow leaves less of its lease, and the beat must
// not wait a third of the lease more. With a clock of the caller's (not
// the wall clock) the claim's times say nothing about real time, and the
// beat counts from the start of the effect.
func TestFirstBeatCountsFromTheClaim(t *testing.T) {
	const lease = 30 * time.Second
	for _, wall := range []bool{true, false} {
		e := &Engine{wallClock: wall, sync: &clockSync{}}
		e.flights.init(e)
		claimed := time.Now().Add(-8 * time.Second) // a slow claim round trip
		h := &heartbeater{e: e, lease: lease}
		before := time.Now()
		h.start(claimed.Add(lease))
		due := h.due
		e.beats.stop(h)
		_ = e.Close()
		if wall {
			if want := claimed.Add(lease / 3); !due.Equal(want) {
				t.Errorf("wall clock: first beat due %v after the claim, want %v", due.Sub(claimed), lease/3)
			}
		} else if due.Before(before.Add(lease / 3)) {
			t.Errorf("caller's clock: first beat due %v from the start, want %v", due.Sub(before), lease/3)
		}
	}
}

// A finishing context made without an engine's timer list still ends at
// its deadline.
func TestFinishCtxWithoutTimers(t *testing.T) {
	var c finishCtx
	c.init(context.Background(), 10*time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", c.Err())
	}
}
