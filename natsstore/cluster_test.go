package natsstore

import (
	"github.com/nats-io/nats.go"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/storetest"
)

// TestCluster runs, on one three-node JetStream cluster the test starts
// on loopback ports of its own, the store suite and the middleware's
// guarantees on three-replica buckets, storetest's race, the replication
// check, and last
// the kill of the bucket's stream leader under load.
func TestCluster(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	nc := connect(t, c.URL())
	t.Run("Conformance", func(t *testing.T) { runConformance(t, nc, c.URL(), 3) })
	t.Run("Middleware", func(t *testing.T) {
		middlewaretest.Run(t, func(t *testing.T) idem.Store { return newStore(t, nc, newBucket(t, nc, 3)) })
	})
	t.Run("Race", func(t *testing.T) {
		rep := storetest.Race(t, newStore(t, nc, newBucket(t, nc, 3)), 16, 50)
		if rep.Extra != 0 || rep.Missing != 0 || rep.Errors != 0 {
			t.Fatalf("race: %+v", rep)
		}
	})
	t.Run("Replication", func(t *testing.T) {
		s := newStore(t, nc, newBucket(t, nc, 3))
		ctx := context.Background()
		rep, err := s.CheckReplication(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Safe() {
			t.Fatalf("R3 bucket on %s judged unsafe: %+v", nc.ConnectedServerVersion(), rep)
		}
		if f, err := s.CheckDurability(ctx); err != nil || len(f) != 0 {
			t.Fatalf("CheckDurability of an R3 file bucket = %v, %v; want no finding", f, err)
		}
		t.Logf("topology: %s", rep.Topology)
		// The engine runs on it without any allowance.
		e, err := idem.New(s, idem.Config{})
		if err != nil {
			t.Fatalf("idem.New on an R3 bucket: %v", err)
		}
		e.Close()
	})
	t.Run("LeaderKill", func(t *testing.T) { leaderKill(t, c) })
}

// leaderKill drives first-time intents from 8 clients, each intent sent
// by two of them at once and every send repeated until it has an answer
// (at-least-once delivery), SIGKILLs the leader of the bucket's stream
// once a third of the intents are answered, and checks that no
// acknowledged claim was lost (every effect that ran is the one its
// intent's record holds, recorded) and that no intent's effect ran twice.
func leaderKill(t *testing.T, c *testenv.NATSCluster) {
	const (
		clients = 8
		keys    = 400
	)
	nc := connect(t, c.URL())
	bucket := newBucket(t, nc, 3)
	type ran struct {
		fence   int64
		attempt string
	}
	var (
		mu       sync.Mutex
		effects  = make([][]ran, keys)
		answered atomic.Int64
		lost     atomic.Int64 // EventLostClaim seen by an engine
	)
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventLostClaim {
			lost.Add(1)
		}
	})
	engines := make([]*idem.Engine, clients)
	for i := range engines {
		st := newStore(t, connect(t, c.URL()), bucket)
		e, err := idem.New(st, idem.Config{Lease: 3 * time.Second, FinishTimeout: 60 * time.Second, Observer: obs})
		if err != nil {
			t.Fatalf("idem.New: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		engines[i] = e
	}
	req := func(k int) idem.Request {
		key := fmt.Sprint("k", k)
		return idem.Request{Scope: "failover", Key: idem.Key(key), Fingerprint: idem.NewFingerprint([]byte(key))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// send repeats intent k from engine e until it has an answer: the
	// effect's value (first or replayed), or an outcome that is decided
	// (unknown after a lease lost in the failover).
	send := func(e *idem.Engine, k int) error {
		var last error
		for ctx.Err() == nil {
			_, err := e.DoBytes(ctx, req(k), func(_ context.Context, a *idem.Attempt) ([]byte, error) {
				mu.Lock()
				effects[k] = append(effects[k], ran{a.Fence, a.ID})
				mu.Unlock()
				return []byte(fmt.Sprint("v", k)), nil
			})
			if err == nil || errors.Is(err, idem.ErrUnknownOutcome) || errors.Is(err, idem.ErrUnknown) {
				return nil
			}
			last = err
			time.Sleep(20 * time.Millisecond) // in flight elsewhere, or the store failing over
		}
		return fmt.Errorf("%w (last answer: %v)", ctx.Err(), last)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				// Two racers per intent: this client and the next one.
				var pair sync.WaitGroup
				var e2 error
				pair.Add(1)
				go func() { defer pair.Done(); e2 = send(engines[(i+1)%clients], k) }()
				e1 := send(engines[i], k)
				pair.Wait()
				if err := errors.Join(e1, e2); err != nil {
					errs <- fmt.Errorf("intent %d: %w", k, err)
					return
				}
				answered.Add(1)
			}
		}()
	}
	killed := make(chan string, 1)
	var killedAt atomic.Int64
	go func() {
		for answered.Load() < keys/3 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		leader, err := streamLeader(ctx, nc, "KV_"+bucket)
		if err != nil {
			killed <- "no leader: " + err.Error()
			return
		}
		killedAt.Store(answered.Load())
		c.Node(leader).Kill()
		killed <- leader
	}()
	for k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	leader := <-killed
	if c.Node(leader) == nil {
		t.Fatalf("the stream leader was not killed: %s", leader)
	}
	if killedAt.Load() >= keys {
		t.Fatalf("the leader was killed after every intent was answered (%d): not mid-run", killedAt.Load())
	}

	// Read every record through a client of the surviving servers.
	s := newStore(t, connect(t, c.URL()), bucket)
	acked, dup, lostClaims, unknown := 0, 0, 0, 0
	for k := range keys {
		acked += len(effects[k])
		if len(effects[k]) > 1 {
			dup++
			t.Errorf("intent %d: effect ran %d times: %+v", k, len(effects[k]), effects[k])
		}
		rec, err := s.Get(ctx, "failover", fmt.Sprint("k", k))
		switch {
		case len(effects[k]) == 0:
			// No effect ran: the record may be unknown (a claim whose
			// lease passed in the failover) but never succeeded.
			if err == nil && rec.State == idem.StateSucceeded {
				t.Errorf("intent %d: recorded succeeded but no effect ran", k)
			}
			unknown++
		case err != nil:
			lostClaims++
			t.Errorf("intent %d: effect ran under fence %d, record: %v", k, effects[k][0].fence, err)
		default:
			last := effects[k][len(effects[k])-1]
			if rec.Fence != last.fence || rec.AttemptID != last.attempt {
				lostClaims++
				t.Errorf("intent %d: effect ran under fence %d attempt %s, record holds fence %d attempt %s (%s)",
					k, last.fence, last.attempt, rec.Fence, rec.AttemptID, rec.State)
			}
		}
	}
	t.Logf("killed leader %s after %d of %d intents; %d acknowledged claims ran their effect, %d lost, %d intents with a second effect, %d without an effect (unknown), %d lost-claim events",
		leader, killedAt.Load(), keys, acked, lostClaims, dup, unknown, lost.Load())
	if lost.Load() != 0 {
		t.Errorf("%d lost-claim events", lost.Load())
	}
}

// streamLeader asks JetStream which server leads the stream.
func streamLeader(ctx context.Context, nc *nats.Conn, stream string) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", errors.New("stream has no leader")
	}
	return info.Cluster.Leader, nil
}
