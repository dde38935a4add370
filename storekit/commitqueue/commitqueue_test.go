package commitqueue

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/groupcommit"
)

type req struct {
	n int
	t Ticket
}

func (r *req) GroupTicket() *Ticket { return &r.t }

func TestCollect(t *testing.T) {
	q := make(chan *req, 10)
	quit := make(chan struct{})
	for i := 1; i <= 5; i++ {
		q <- &req{n: i}
	}
	// Stops at max without waiting for the window.
	start := time.Now()
	b := Collect(&req{n: 0}, q, quit, time.Hour, 3)
	if len(b) != 3 || b[0].n != 0 || b[2].n != 2 || time.Since(start) > time.Minute {
		t.Fatalf("full batch = %d requests", len(b))
	}
	// Skips abandoned requests, stops at the window.
	abandoned := <-q
	if !abandoned.t.Abandon() {
		t.Fatal("a queued request could not be abandoned")
	}
	q <- abandoned
	b = Collect(&req{n: 9}, q, quit, 10*time.Millisecond, 100)
	if len(b) != 3 {
		t.Fatalf("batch after the window = %d requests, want 3 (one abandoned)", len(b))
	}
	for _, r := range b {
		if r.t.Abandon() {
			t.Fatal("a request taken by a batch could still be abandoned")
		}
	}
	// Drain fails what is left, once.
	q <- &req{n: 20}
	failed := 0
	Drain(q, func(*req) { failed++ })
	if failed != 1 {
		t.Fatalf("drained %d", failed)
	}
}

// TestCollectEager: with no window, Collect takes what is queued (up to
// max) and returns: with nothing queued, the first write goes alone.
func TestCollectEager(t *testing.T) {
	q := make(chan *req, 10)
	quit := make(chan struct{}) // never closed: only an empty queue may end the gathering
	if b := Collect(&req{n: 0}, q, quit, 0, 8); len(b) != 1 {
		t.Fatalf("batch from an empty queue = %d requests, want 1", len(b))
	}
	for i := 1; i <= 5; i++ {
		q <- &req{n: i}
	}
	if b := Collect(&req{n: 0}, q, quit, 0, 4); len(b) != 4 || b[3].n != 3 {
		t.Fatalf("batch = %d requests, want the first and 3 queued", len(b))
	}
	if b := Collect(&req{n: 0}, q, quit, 0, 8); len(b) != 3 {
		t.Fatalf("batch = %d requests, want the first and the 2 left", len(b))
	}
}

func TestDefaults(t *testing.T) {
	c, err := Defaults("x", groupcommit.Config{Window: time.Millisecond})
	if err != nil || c.MaxSize != groupcommit.DefaultSize || !c.On() {
		t.Fatalf("%+v, %v", c, err)
	}
	if c, err := Defaults("x", groupcommit.Config{Eager: true}); err != nil || !c.On() || c.MaxSize != groupcommit.DefaultSize {
		t.Fatalf("eager: %+v, %v", c, err)
	}
	for _, bad := range []groupcommit.Config{{Window: -1}, {Window: 2 * time.Second}, {MaxSize: groupcommit.MaxSize + 1}, {MaxSize: -1},
		{Window: time.Millisecond, Eager: true}} {
		if _, err := Defaults("pgstore", bad); err == nil || !strings.Contains(err.Error(), "pgstore: Config.Batch.") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if (groupcommit.Config{}).On() {
		t.Fatal("the zero Config is on")
	}
}

type qreq struct {
	n    int
	t    Ticket
	done chan int
}

func (r *qreq) GroupTicket() *Ticket { return &r.t }

func submit(ctx context.Context, q *Queue[*qreq], n int) int {
	r := &qreq{n: n, done: make(chan int, 1)}
	return Submit(ctx, q, r, r.done, func(error) int { return -1 }, func() int { return -2 })
}

// TestQueue: every caller gets the answer its batch's flush sent; a caller
// whose context has ended, or who arrives after Stop, gets its own answer
// without a batch.
func TestQueue(t *testing.T) {
	var batches atomic.Int32
	q := Start(groupcommit.Config{Window: time.Millisecond, MaxSize: 8},
		func(b []*qreq) {
			batches.Add(1)
			for _, r := range b {
				r.done <- r.n * 10
			}
		},
		func(r *qreq) { r.done <- -2 })
	var wg sync.WaitGroup
	for i := 1; i <= 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := submit(context.Background(), q, i); got != i*10 {
				t.Errorf("caller %d got %d", i, got)
			}
		}()
	}
	wg.Wait()
	if n := batches.Load(); n < 3 || n > 20 {
		t.Errorf("%d batches for 20 writes of at most 8", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := submit(ctx, q, 1); got != -1 && got != 10 {
		t.Errorf("canceled caller got %d", got)
	}
	q.Stop()
	if got := submit(context.Background(), q, 1); got != -2 {
		t.Errorf("caller after Stop got %d, want the stopped answer", got)
	}
}
