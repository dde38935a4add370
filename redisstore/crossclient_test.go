package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestCrossClientRace races two stores on separate clients (two processes'
// worth of connections) through two engines on the same keys.
func TestCrossClientRace(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			sa := newStoreOn(t, b.client(t), Config{})
			sb := newStoreOn(t, b.client(t), Config{Prefix: sa.prefix})
			engines := []*idem.Engine{newEngine(t, sa, idem.Config{}), newEngine(t, sb, idem.Config{})}
			const keys, goroutines = 40, 8
			counts := make([]atomic.Int64, keys)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					eng := engines[g%2]
					for i := range keys {
						k := (i + g*5) % keys
						req := idem.Request{Scope: "x", Key: idem.Key(fmt.Sprint("k", k)), Fingerprint: idem.NewFingerprint([]byte("same"))}
						for try := 0; try < 2000; try++ {
							_, err := eng.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
								counts[k].Add(1)
								return []byte("ok"), nil
							})
							if !errors.Is(err, idem.ErrInFlight) {
								if err != nil {
									t.Error(err)
								}
								break
							}
							time.Sleep(time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
			for k := range counts {
				if n := counts[k].Load(); n != 1 {
					t.Errorf("key %d ran its effect %d times, want 1", k, n)
				}
			}
		})
	}
}

func newEngine(t *testing.T, st idem.Store, cfg idem.Config) *idem.Engine {
	t.Helper()
	cfg.AllowVolatileStore = true // the test server may run without persistence
	e, err := idem.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// countingStore counts Get calls, keeping the Notifier of the Store.
type countingStore struct {
	*Store
	gets    atomic.Int64
	firstMu sync.Once
	first   chan struct{}
}

func (c *countingStore) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	c.gets.Add(1)
	c.firstMu.Do(func() { close(c.first) })
	return c.Store.Get(ctx, scope, key)
}

// TestWaiterWokenByPubSub: waiters in another client learn the outcome from
// the store's notification, and read the store a bounded number of times.
func TestWaiterWokenByPubSub(t *testing.T) {
	cases := []struct {
		name    string
		poll    time.Duration // store PollFallback and engine PollMax
		hold    time.Duration // how long the first attempt runs after the waiters wait
		maxGets int64
	}{
		// Nothing but the notification can wake the waiters in time: the
		// fallbacks are an hour away. Removing the publish makes this hang.
		{"pubsub only", time.Hour, 0, 3},
		// A 2 s wait with 1 s fallbacks: reads stay bounded by the
		// fallback ticks, not by the number of waiters.
		{"fallback 1s", time.Second, 2 * time.Second, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sa := newStoreOn(t, standaloneClient(t), Config{})
			sb := &countingStore{Store: newStoreOn(t, standaloneClient(t), Config{Prefix: sa.prefix, PollFallback: tc.poll}), first: make(chan struct{})}
			ea := newEngine(t, sa, idem.Config{Lease: 2 * time.Hour})
			eb := newEngine(t, sb, idem.Config{Lease: 2 * time.Hour, InFlight: idem.InFlightWait, Wait: time.Minute, PollMax: tc.poll})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := idem.Request{Scope: "x", Key: "pay:v1:1", Fingerprint: idem.NewFingerprint([]byte("same"))}

			started, release := make(chan struct{}), make(chan struct{})
			firstDone := make(chan error, 1)
			go func() {
				_, err := ea.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
					close(started)
					<-release
					return []byte("paid"), nil
				})
				firstDone <- err
			}()
			<-started
			const waiters = 4
			results := make(chan error, waiters)
			for range waiters {
				go func() {
					res, err := eb.DoBytes(ctx, req, func(context.Context, *idem.Attempt) ([]byte, error) {
						return nil, errors.New("duplicate effect ran")
					})
					if err == nil && (!res.Replayed || string(res.Value) != "paid") {
						err = fmt.Errorf("waiter got %+v, want replay of paid", res)
					}
					results <- err
				}()
			}
			select {
			case <-sb.first:
			case <-ctx.Done():
				t.Fatal("waiters never read the store")
			}
			time.Sleep(tc.hold)
			close(release)
			if err := <-firstDone; err != nil {
				t.Fatal(err)
			}
			for range waiters {
				if err := <-results; err != nil {
					t.Fatal(err)
				}
			}
			gets := sb.gets.Load()
			t.Logf("%d waiters, %d store reads in total", waiters, gets)
			if gets > tc.maxGets {
				t.Fatalf("%d store reads, want at most %d", gets, tc.maxGets)
			}
		})
	}
}
