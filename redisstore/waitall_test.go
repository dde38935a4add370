package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// replicatedPair is a primary with n replicas, each replicating through a
// relay the test controls.
type replicated struct {
	primary  *testenv.RedisNode
	replicas []*testenv.RedisNode
	links    []*testenv.Relay
}

// startReplicated starts a primary on base and n replicas on base+1…,
// and returns once the primary counts them all online.
func startReplicated(t *testing.T, base, n int) *replicated {
	t.Helper()
	r := &replicated{primary: testenv.StartRedisNode(t, base, "--appendonly", "yes")}
	for i := range n {
		link := testenv.StartRelay(t, r.primary.Addr())
		r.links = append(r.links, link)
		r.replicas = append(r.replicas, testenv.StartRedisNode(t, base+1+i, "--appendonly", "yes", "--replicaof", "127.0.0.1", strconv.Itoa(link.Port())))
	}
	replicaOnline(t, r.primary.Addr(), n)
	return r
}

// client returns a client of the primary, closed when the test ends.
func (r *replicated) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.primary.Addr(), PoolSize: 8})
	t.Cleanup(func() { c.Close() })
	return c
}

// clientNoPipeline returns a client whose read timeout (1s) is too short
// for a pipelined WAIT of any timeout (the store wants a second to
// spare): its claims wait in commands of their own.
func (r *replicated) clientNoPipeline(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.primary.Addr(), PoolSize: 8, ReadTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWaitAllReplicas: with Replicas = AllReplicas a claim waits for every
// replica the primary counts as connected, fails closed when one of them
// cannot acknowledge (and frees the key, since no effect ran), follows
// the replicas as they go, and fails closed below MinReplicas. A fixed
// count equal to the replicas there were makes the store unwritable as
// soon as one is gone: the trade-off AllReplicas avoids.
func TestWaitAllReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and two replicas")
	}
	t.Parallel()
	r := startReplicated(t, 7340, 2)
	ctx := context.Background()
	wait := func() *WaitConfig { return &WaitConfig{Replicas: AllReplicas, Timeout: time.Second} }
	all := newStoreOn(t, r.client(t), Config{Wait: wait()})
	// unpiped waits in commands of its own after the claim; it gets the
	// same claims, under keys of its own.
	unpiped := newStoreOn(t, r.clientNoPipeline(t), Config{Prefix: all.prefix + "-u", Wait: wait()})
	if !all.pipelineWait || unpiped.pipelineWait {
		t.Fatalf("pipelined waits: %v and %v, want true and false", all.pipelineWait, unpiped.pipelineWait)
	}
	fixed := newStoreOn(t, r.client(t), Config{Prefix: all.prefix, Wait: &WaitConfig{Replicas: 2, Timeout: time.Second}})
	claimOne := func(s *Store, key string) error {
		res, err := s.Claim(ctx, claimP(key, "a-"+key, time.Now()))
		if err == nil && !res.Claimed {
			t.Fatalf("claim of a fresh key %s not claimed: %+v", key, res)
		}
		return err
	}
	// claim claims key on s and, for all, on unpiped too: both must
	// answer alike.
	claim := func(s *Store, key string) error {
		err := claimOne(s, key)
		if s == all {
			if uerr := claimOne(unpiped, key); (uerr == nil) != (err == nil) || !errors.Is(uerr, ErrNotDurable) != !errors.Is(err, ErrNotDurable) {
				t.Errorf("claim of %s: pipelined %v, unpipelined %v", key, err, uerr)
			}
		}
		return err
	}
	if err := claim(all, "k1"); err != nil {
		t.Fatalf("claim with both replicas in sync: %v", err)
	}

	// One replica cannot acknowledge: closed, and the key is free again.
	r.links[1].Stall()
	start := time.Now()
	err := claim(all, "k2")
	if !errors.Is(err, ErrNotDurable) || !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("claim with a stalled replica = %v, want ErrNotDurable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing closed (twice) took %v with a 1s wait", d)
	}
	if _, err := all.Get(ctx, "tenant-a", "k2"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("the claim that was not confirmed is still there (%v): a retry would find it in flight, then unknown", err)
	}
	r.links[1].Resume()
	if err := claim(all, "k2"); err != nil {
		t.Fatalf("retry once the replica caught up: %v", err)
	}

	// A replica goes: AllReplicas follows, a fixed count of 2 cannot.
	r.replicas[1].Kill()
	replicaGone(t, r.primary.Addr(), 1)
	if err := claim(all, "k3"); err != nil {
		t.Errorf("AllReplicas with one replica left: %v", err)
	}
	if err := claim(fixed, "k4"); !errors.Is(err, ErrNotDurable) {
		t.Errorf("Replicas 2 with one replica left = %v, want ErrNotDurable", err)
	}

	// Below MinReplicas (1): closed.
	r.replicas[0].Kill()
	replicaGone(t, r.primary.Addr(), 0)
	if err := claim(all, "k5"); !errors.Is(err, ErrNotDurable) {
		t.Errorf("AllReplicas with no replica left = %v, want ErrNotDurable (min_replicas 1)", err)
	}
	rep, err := all.CheckReplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with no replica left: %s %+v", rep.Topology, rep.Findings)
}

// replicaGone waits until the primary at addr counts at most n replicas.
func replicaGone(t *testing.T, addr string, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := onlineReplicas(context.Background(), c)
		if err == nil && got <= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still counts %d replicas (%v), want %d", addr, got, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOwnClaimWaitsAgain: a retried claim that finds its own in_progress
// record (its first answer was lost after the write) confirms that record
// on the replicas before it reports "claimed", on the claim path and on
// the read-first path alike, from a connection that did not write it.
// Without the wait the effect would run on a claim a failover can lose.
func TestOwnClaimWaitsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary and a replica")
	}
	t.Parallel()
	r := startReplicated(t, 7343, 1)
	ctx := context.Background()
	for _, wait := range []*WaitConfig{{Replicas: AllReplicas, Timeout: 500 * time.Millisecond}, {Replicas: 1, Timeout: 500 * time.Millisecond}} {
		for _, readFirst := range []bool{false, true} {
			// writer makes the claim without waiting, as a claim whose
			// answer was lost did; the retry runs on another client.
			writer := newStoreOn(t, r.client(t), Config{})
			client := r.client(t)
			if readFirst { // the read-first path also waits in commands of its own
				client = r.clientNoPipeline(t)
			}
			retry := newStoreOn(t, client, Config{Prefix: writer.prefix, Wait: wait})
			key := "own-" + strconv.Itoa(wait.Replicas) + "-" + strconv.FormatBool(readFirst)
			r.links[0].Stall()
			p := claimP(key, "attempt-1", time.Now())
			if res := mustClaim(t, writer, p); !res.Claimed {
				t.Fatalf("first claim: %+v", res)
			}
			retry.mix.Pin(readFirst)
			res, err := retry.Claim(ctx, p)
			if !errors.Is(err, ErrNotDurable) {
				t.Errorf("wait %d, read-first %v: the retried claim found its own record, not on the replica, and answered %+v, %v; want ErrNotDurable",
					wait.Replicas, readFirst, res, err)
			}
			r.links[0].Resume()
			if res, err := retry.Claim(ctx, p); err != nil || !res.Claimed {
				t.Errorf("wait %d, read-first %v: retry once the replica caught up: %+v, %v", wait.Replicas, readFirst, res, err)
			}
		}
	}
}
