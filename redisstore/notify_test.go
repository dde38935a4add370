package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// connTracker wraps the connections a client dials, so a test can break
// its subscriber connections: close them (an error go-redis sees) or
// freeze them (nothing arrives any more, no error: a silent connection).
type connTracker struct {
	mu      sync.Mutex
	conns   []*trackedConn
	refuse  atomic.Bool // new dials fail, as to a node that is down
	refused atomic.Int64
}

type trackedConn struct {
	net.Conn
	pubsub atomic.Bool // it sent a (S)SUBSCRIBE
	frozen atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (tr *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if tr.refuse.Load() {
		tr.refused.Add(1)
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (test)")}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, closed: make(chan struct{})}
	tr.mu.Lock()
	tr.conns = append(tr.conns, tc)
	tr.mu.Unlock()
	return tc, nil
}

func (c *trackedConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) {
		c.pubsub.Store(true)
	}
	if c.frozen.Load() {
		return len(b), nil // swallowed
	}
	return c.Conn.Write(b)
}

func (c *trackedConn) Read(b []byte) (int, error) {
	if !c.frozen.Load() {
		n, err := c.Conn.Read(b)
		if !c.frozen.Load() {
			return n, err
		}
	}
	// Frozen: whatever arrives is lost, and nothing is read until the
	// connection is closed.
	<-c.closed
	return 0, net.ErrClosed
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// breakPubSub closes (or freezes) every subscriber connection dialed so
// far and returns how many it broke.
func (tr *connTracker) breakPubSub(freeze bool) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.conns {
		if !c.pubsub.Load() {
			continue
		}
		n++
		if freeze {
			c.frozen.Store(true)
		} else {
			_ = c.Close()
		}
	}
	return n
}

func trackedClient(t *testing.T, cluster bool, tr *connTracker) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if cluster {
		addrs := strings.TrimPrefix(testenv.RedisCluster.Need(t), "redis+cluster://")
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), Dialer: tr.dial})
	} else {
		opt, err := redis.ParseURL(testenv.Redis.Need(t))
		if err != nil {
			t.Fatal(err)
		}
		opt.Dialer = tr.dial
		c = redis.NewClient(opt)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSubscriptionLostAndRecovered: while pub/sub works, nothing signals a
// subscription but a message — no timer, so a waiter's reads do not grow
// with its wait. When the subscriber connection breaks and finishes'
// messages are lost, every subscription is signalled once the hub has
// subscribed it again, and later messages arrive again: after a connection
// error (in a Cluster, go-redis's own resubscription sends every channel
// in one SSUBSCRIBE, which fails with CROSSSLOT across slots, so the hub
// subscribes each again itself), and after a connection that went silent
// and stopped answering PING.
func TestSubscriptionLostAndRecovered(t *testing.T) {
	for _, b := range backends {
		for _, freeze := range []bool{false, true} {
			name := b.name + map[bool]string{false: "/closed", true: "/silent"}[freeze]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				tr := &connTracker{}
				s := newStoreOn(t, trackedClient(t, b.name == "cluster", tr), Config{PollFallback: 100 * time.Millisecond})
				s.hub.deadAfter = 500 * time.Millisecond
				w := newStoreOn(t, b.client(t), Config{Prefix: s.prefix})

				// Enough records that, in a Cluster, a master carries
				// channels of several slots on one connection.
				const n = 16
				claims := make([]idem.Record, n)
				sigs := make([]<-chan struct{}, n)
				for i := range claims {
					claims[i] = mustClaim(t, w, claimP(fmt.Sprint("lost-", i), "a1", t0)).Record
					ch, cancel, err := s.Subscribe(ctx, claims[i].Scope, claims[i].Key)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(cancel)
					sigs[i] = ch
				}
				// Ten PollFallbacks with no write: no signal.
				time.Sleep(time.Second)
				for i, ch := range sigs {
					select {
					case <-ch:
						t.Fatalf("subscription %d signalled with no write and no lost connection", i)
					default:
					}
				}

				if tr.breakPubSub(freeze) == 0 {
					t.Fatal("no subscriber connection to break")
				}
				// The first half finishes while the subscriptions are down
				// (or being restored): their messages may be lost.
				finishAll(t, w, claims[:n/2])
				waitFinished(t, s, claims[:n/2], sigs[:n/2])
				// Once restored, the subscriptions carry messages again: the
				// second half is woken by its finishes' messages alone.
				time.Sleep(500 * time.Millisecond) // past the resyncs
				for _, ch := range sigs[n/2:] {
					select {
					case <-ch:
					default:
					}
				}
				finishAll(t, w, claims[n/2:])
				waitFinished(t, s, claims[n/2:], sigs[n/2:])
			})
		}
	}
}

func finishAll(t *testing.T, w *Store, claims []idem.Record) {
	t.Helper()
	for _, c := range claims {
		fp := finishP(c, idem.StateSucceeded, "done", t0)
		fp.Claim = c
		if _, err := w.Finish(context.Background(), fp); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFinished waits until each subscription is signalled at a moment its
// record reads as finished, as a waiter needs.
func waitFinished(t *testing.T, s *Store, claims []idem.Record, sigs []<-chan struct{}) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for i, ch := range sigs {
		for woken := false; !woken; {
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("subscription of %s never signalled after its finish", claims[i].Key)
			}
			rec, err := s.Get(context.Background(), claims[i].Scope, claims[i].Key)
			if err != nil {
				t.Fatal(err)
			}
			woken = rec.State == idem.StateSucceeded
		}
	}
}

// TestReclaimAfterReleaseMarked: a waiter that outlives a release may read
// the key claimed again by another attempt, whose claim is not marked as
// awaited; the hub marks it after the release's message (and once more
// PollFallback later), so that claim's first-time finish publishes.
func TestReclaimAfterReleaseMarked(t *testing.T) {
	forBackends(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := newStoreOn(t, c, Config{PollFallback: 200 * time.Millisecond})
		w := newStoreOn(t, c, Config{Prefix: s.prefix})
		first := mustClaim(t, w, claimP("reclaimed", "a1", t0)).Record
		sig, cancel, err := s.Subscribe(ctx, first.Scope, first.Key)
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		if err := w.Release(ctx, idem.ReleaseParams{Scope: first.Scope, Key: first.Key, Fence: first.Fence, AttemptID: first.AttemptID}); err != nil {
			t.Fatal(err)
		}
		second := mustClaim(t, w, claimP("reclaimed", "a2", t0))
		if !second.Claimed {
			t.Fatalf("second claim: %+v", second)
		}
		select {
		case <-sig:
		case <-time.After(5 * time.Second):
			t.Fatal("the release did not signal")
		}
		time.Sleep(600 * time.Millisecond) // both marks are done
		msgs := rawSubscribe(t, c, s, chanKey(s.recKey(first.Scope, first.Key)))
		fp := finishP(second.Record, idem.StateSucceeded, "v", t0)
		fp.Claim = second.Record
		if _, err := w.Finish(ctx, fp); err != nil {
			t.Fatal(err)
		}
		select {
		case <-msgs:
		case <-time.After(2 * time.Second):
			t.Fatal("the finish of the claim after the release did not publish: it was not marked as awaited")
		}
	})
}

// TestSubscribeFailsWhenPubSubUnreachable: when the subscriber connection
// cannot be opened, Subscribe fails at once with a store error, so the
// engine polls; it does not hold the waiter, reading nothing, until its
// context ends.
func TestSubscribeFailsWhenPubSubUnreachable(t *testing.T) {
	tr := &connTracker{}
	s, err := New(trackedClient(t, false, tr), Config{Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tr.refuse.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, key := range []string{"k1", "k1", "k2"} { // a new channel, the same orphan again, another
		start := time.Now()
		_, _, err := s.Subscribe(ctx, "s", key)
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Fatalf("Subscribe(%s) with pub/sub unreachable = %v after %s, want a store error at once", key, err, time.Since(start))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Subscribe(%s) took %s to fail", key, d)
		}
	}
	// Once the connection can be opened again, subscribing works.
	tr.refuse.Store(false)
	_, cancelSub, err := s.Subscribe(ctx, "s", "k3")
	if err != nil {
		t.Fatalf("Subscribe after recovery: %v", err)
	}
	cancelSub()
}

// TestResubscribeDialsOncePerRound: while a node is down, each
// re-subscription round dials it once, not once per waited-on channel.
func TestResubscribeDialsOncePerRound(t *testing.T) {
	tr := &connTracker{}
	s, err := New(trackedClient(t, false, tr), Config{Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	const channels = 20
	for i := range channels {
		_, cancel, err := s.Subscribe(ctx, "s", fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	tr.refuse.Store(true)
	if n := tr.breakPubSub(false); n == 0 {
		t.Fatal("no subscriber connection to break")
	}
	time.Sleep(2 * time.Second) // a handful of rounds (100 ms, doubling)
	if n := tr.refused.Load(); n > 2*channels {
		t.Fatalf("%d dials in 2 s for %d orphaned channels on one node: a round dials once per channel", n, channels)
	}
	t.Logf("%d refused dials in 2 s", tr.refused.Load())
}

// TestMovedUnsubscribeKeepsTheConnection: after a Cluster moves a shard
// channel's slot, the hub unsubscribes the channel on the old owner, which
// answers MOVED. That reply must not count as a broken connection: the
// other channels on it stay subscribed, and their waiters get no spurious
// wake-up (each costs a read).
func TestMovedUnsubscribeKeepsTheConnection(t *testing.T) {
	addrs := strings.Split(testenv.RedisCluster.Need(t), ",")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, Config{Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.pubCmd != "spublish" {
		t.Skipf("SKIP: the cluster has no sharded pub/sub (%q)", s.pubCmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	woken, cancelSub, err := s.Subscribe(ctx, "s", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelSub()
	chA := chanKey(s.recKey("s", "a"))
	route, _, err := s.hub.route(ctx, chA)
	if err != nil {
		t.Fatal(err)
	}
	// A channel another master owns: its SUNSUBSCRIBE on a's connection is
	// what the old owner of a moved slot receives.
	var chB string
	for i := 0; chB == ""; i++ {
		ch := chanKey(s.recKey("s", fmt.Sprint("b", i)))
		if r, _, err := s.hub.route(ctx, ch); err == nil && r != route {
			chB = ch
		}
	}
	s.hub.mu.Lock()
	g := s.hub.groups[route]
	s.hub.mu.Unlock()
	if err := s.hub.sendSub(ctx, g, chB, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
		t.Fatal("a MOVED answer to an unsubscribe woke the waiters of another channel")
	case <-time.After(500 * time.Millisecond):
	}
	s.hub.mu.Lock()
	dead, same := g.dead, s.hub.groups[route] == g
	s.hub.mu.Unlock()
	if dead || !same {
		t.Fatal("a MOVED answer to an unsubscribe closed the connection")
	}
}
