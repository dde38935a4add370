package groupcommit

import (
	"strings"
	"testing"
	"time"
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

func TestWithDefaults(t *testing.T) {
	c, err := Config{Window: time.Millisecond}.WithDefaults("x")
	if err != nil || c.MaxSize != DefaultSize || !c.On() {
		t.Fatalf("%+v, %v", c, err)
	}
	for _, bad := range []Config{{Window: -1}, {Window: 2 * time.Second}, {MaxSize: MaxSize + 1}, {MaxSize: -1}} {
		if _, err := bad.WithDefaults("pgstore"); err == nil || !strings.Contains(err.Error(), "pgstore: Config.Batch.") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if (Config{}).On() {
		t.Fatal("the zero Config is on")
	}
}
