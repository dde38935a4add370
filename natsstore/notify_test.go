package natsstore

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestSubscribeOutlivesItsContext: a subscription made under a context
// that ends at once still signals a later outcome written through another
// connection (an early version tied the watch to the creation's context
// and went deaf).
func TestSubscribeOutlivesItsContext(t *testing.T) {
	url := sharedURL(t)
	nc := connect(t, url)
	s := newStore(t, nc, newBucket(t, nc, 1))
	peer := newStore(t, connect(t, url), s.bucket)
	res, err := s.Claim(context.Background(), claimP("k", "a1", t0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancelCtx := context.WithCancel(context.Background())
	ch, cancel, err := peer.Subscribe(ctx, "tenant-a", "k")
	cancelCtx()
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	<-ch // the value the key held when the watch started
	r := res.Record
	if _, err := s.Finish(context.Background(), idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: idem.StateSucceeded, Result: []byte("x"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal for the outcome within 10s")
	}
}
