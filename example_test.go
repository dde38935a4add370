package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// A charge runs once per intent; the retry gets the recorded outcome.
func ExampleDo() {
	engine, _ := idem.New(memstore.New(), idem.Config{})
	defer engine.Close()

	type charge struct {
		ID     string
		Amount int64
	}
	charges := 0
	chargeOrder := func(ctx context.Context, order string) (charge, idem.Result, error) {
		key, err := idem.DeriveKey("charge", 1, order, "attempt-1")
		if err != nil {
			return charge{}, idem.Result{}, err
		}
		req := idem.Request{Scope: "tenant-42", Key: key, Fingerprint: idem.NewFingerprint([]byte(order), []byte("5000 EUR"))}
		return idem.Do(ctx, engine, req, func(ctx context.Context, a *idem.Attempt) (charge, error) {
			charges++ // the effect: money moves
			return charge{ID: "ch_1", Amount: 5000}, nil
		})
	}

	ctx := context.Background()
	c1, r1, _ := chargeOrder(ctx, "order-123")
	c2, r2, _ := chargeOrder(ctx, "order-123") // the network retried
	fmt.Println(c1.ID, r1.Replayed)
	fmt.Println(c2.ID, r2.Replayed)
	fmt.Println("charges:", charges)
	// Output:
	// ch_1 false
	// ch_1 true
	// charges: 1
}

// A TTL shorter than a window it must cover is refused at start-up.
func ExampleNew_retention() {
	_, err := idem.New(memstore.New(), idem.Config{
		TTL: 24 * time.Hour,
		Cover: map[string]time.Duration{
			"client retry chain": 2 * time.Hour,
			"dlq replay":         7 * 24 * time.Hour,
		},
	})
	fmt.Println(errors.Is(err, idem.ErrRetentionTooShort))
	fmt.Println(err)
	// Output:
	// true
	// idem: retention TTL 24h0m0s is shorter than window "dlq replay" (168h0m0s): a duplicate arriving inside that window would run again
}

// A handler that did nothing releases the key; the next attempt runs.
func ExampleRelease() {
	engine, _ := idem.New(memstore.New(), idem.Config{})
	ctx := context.Background()
	req := idem.Request{Key: "email:v1:welcome:user-7"}

	_, err := engine.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
		return nil, idem.Release(errors.New("address not verified yet"))
	})
	fmt.Println(err)
	res, _ := engine.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
		return []byte("sent"), nil
	})
	fmt.Println(string(res.Value), res.Replayed)
	// Output:
	// address not verified yet
	// sent false
}

// A duplicate arriving while the first attempt runs is rejected with a
// retry-after hint; after the outcome is recorded it replays.
func ExampleInFlightError() {
	engine, _ := idem.New(memstore.New(), idem.Config{RetryAfter: 2 * time.Second})
	ctx := context.Background()
	req := idem.Request{Key: "refund:v1:order-9"}
	running, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		engine.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			close(running)
			time.Sleep(50 * time.Millisecond)
			return []byte("refunded"), nil
		})
	}()
	<-running
	retry := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("refunded twice!"), nil }
	_, err := engine.DoBytes(ctx, req, retry)
	var inflight *idem.InFlightError
	if errors.As(err, &inflight) {
		fmt.Println("in flight, retry after", inflight.RetryAfter)
	}
	<-done
	res, _ := engine.DoBytes(ctx, req, retry)
	fmt.Println(string(res.Value), res.Replayed)
	// Output:
	// in flight, retry after 2s
	// refunded true
}

// Duplicates of an in-flight key, answered without a goroutine each.
func ExampleEngine_DoAsync() {
	engine, _ := idem.New(memstore.New(), idem.Config{InFlight: idem.InFlightWait, Wait: time.Minute})
	defer engine.Close()
	ctx := context.Background()
	req := idem.Request{Key: "webhook-evt_1", Fingerprint: idem.NewFingerprint([]byte("evt_1"))}

	started, finish := make(chan struct{}), make(chan struct{})
	first := make(chan idem.Result)
	engine.DoAsync(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
		close(started)
		<-finish // the effect takes a while
		return []byte("delivered"), nil
	}, func(r idem.Result, err error) { first <- r })
	<-started

	// Redeliveries arrive while the first attempt runs: each is parked on
	// the key's shared watch and replays the outcome.
	answers := make(chan idem.Result, 3)
	for range 3 {
		engine.DoAsync(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
			return nil, errors.New("never runs: the key is in flight")
		}, func(r idem.Result, err error) { answers <- r })
	}
	close(finish)
	r := <-first
	fmt.Println(string(r.Value), r.Replayed)
	for range 3 {
		r := <-answers
		fmt.Println(string(r.Value), r.Replayed)
	}
	// Output:
	// delivered false
	// delivered true
	// delivered true
	// delivered true
}
