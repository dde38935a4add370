package redisstore

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestClusterFailoverWaitAll is TestSentinelFailoverWaitAll on a Redis
// Cluster of 3 masters with 1 replica each: intents over every shard,
// each sent twice; master 1's replication link stalls halfway; master 1
// is SIGKILLed and its replica takes over. With wait_replicas=all no
// claim made during the stall is acknowledged, and every claim that was
// is on the replica: no effect runs twice. The new master has no replica
// left, so its shard refuses claims (min_replicas 1) until the old
// master, restarted, rejoins as its replica: the test restarts it before
// retrying everything.
func TestClusterFailoverWaitAll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster with replicas and kills a master")
	}
	t.Parallel()
	rc := startReplCluster(t, 7310, true)
	l := newFailoverLoad(t, 240, 0)
	st := newStoreOn(t, rc.client(t, time.Second), Config{Prefix: l.prefix, Wait: &WaitConfig{Replicas: AllReplicas, Timeout: 300 * time.Millisecond}})
	rep, err := st.CheckReplication(context.Background())
	if err != nil || !rep.Safe() || len(rep.Findings) != 0 {
		t.Fatalf("CheckReplication = %+v, %v; want safe without findings", rep, err)
	}
	t.Logf("topology: %s", rep.Topology)
	e, err := l.engine(st, false)
	if err != nil {
		t.Fatalf("New refuses wait_replicas=all on a Cluster: %v", err)
	}
	stop := make(chan struct{})
	sent := l.firstPhase(e, 8, func() {
		rc.links[1].Stall()
		l.phase.Store(phaseStall)
		time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	}, stop)
	l.phase.Store(phaseAfter)
	took := rc.killMaster(t, 1)
	onVictim := rc.keysOf(t, st, l, 1)
	stallOnVictim := 0
	for k := range l.keys {
		if onVictim[k] && l.ranInStall[k].Load() {
			stallOnVictim++
		}
	}
	t.Logf("sent %d of %d intents before the kill; effects ran: %d before the stall, %d by sends started during it (%d on master 1's shard); replica promoted %.1fs after the kill",
		sent, l.keys, l.effectsIn[phaseBefore].Load(), l.effectsIn[phaseStall].Load(), stallOnVictim, took.Seconds())
	if stallOnVictim != 0 {
		t.Errorf("%d effects ran on claims master 1 made while its replica could not acknowledge them: wait_replicas=all must fail them closed", stallOnVictim)
	}
	if rep, err := st.CheckReplication(context.Background()); err == nil {
		t.Logf("after the failover: %s; %d findings (%v)", rep.Topology, len(rep.Findings), rep.Findings)
	}
	start := time.Now()
	rc.masters[1].Restart()
	replicaOnline(t, rc.replicas[1].Addr(), 1)
	t.Logf("the old master rejoined as a replica %.1fs after its restart", time.Since(start).Seconds())
	unanswered, _ := l.retryAll(e, 8, 25*time.Second)
	l.wg.Wait()
	dups := l.duplicates()
	t.Logf("%d effects in all; %d duplicates; %d lost claims detected", l.effectsRun(), len(dups), l.lostClaims.Load())
	if unanswered > 0 {
		t.Errorf("%d intents got no answer after the failover", unanswered)
	}
	if len(dups) > 0 {
		t.Errorf("%d intents ran their effect more than once: %v", len(dups), dups)
	}
}

// TestClusterFailoverAsync is the negative control of
// TestClusterFailoverWaitAll: claims that do not wait for the replica.
// idem.New refuses the Cluster; with AllowAsyncReplication the claims
// master 1 acknowledged during the stall are lost with it, and their
// retries run the effect again.
func TestClusterFailoverAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster with replicas and kills a master")
	}
	t.Parallel()
	rc := startReplCluster(t, 7320, true)
	l := newFailoverLoad(t, 240, 0)
	st := newStoreOn(t, rc.client(t, time.Second), Config{Prefix: l.prefix})
	if _, err := l.engine(st, false); !errors.Is(err, idem.ErrUnsafeReplication) {
		t.Fatalf("New on a Cluster whose claims do not wait = %v, want ErrUnsafeReplication", err)
	}
	e, err := l.engine(st, true)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	l.firstPhase(e, 8, func() {
		rc.links[1].Stall()
		l.phase.Store(phaseStall)
		time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	}, stop)
	l.phase.Store(phaseAfter)
	took := rc.killMaster(t, 1)
	unanswered, _ := l.retryAll(e, 8, 25*time.Second)
	l.wg.Wait()
	dups := l.duplicates()
	onVictim := rc.keysOf(t, st, l, 1)
	stallOnVictim := 0
	for k := range l.keys {
		if onVictim[k] && l.ranInStall[k].Load() {
			stallOnVictim++
		}
	}
	for _, k := range dups {
		if !onVictim[k] {
			t.Errorf("intent %d ran twice, but its shard did not fail over", k)
		}
	}
	t.Logf("replica promoted %.1fs after the kill; duplicate effects without a wait: %d of %d intents (%d effects on master 1's shard by sends started during the stall); lost claims detected: %d",
		took.Seconds(), len(dups), l.keys, stallOnVictim, l.lostClaims.Load())
	if unanswered > 0 {
		t.Errorf("%d intents got no answer after the failover", unanswered)
	}
	if len(dups) == 0 {
		t.Fatal("no duplicate effect: the negative control did not lose the claims the replica never received")
	}
}

// TestClusterFailoverWindow measures how long the shard of a killed
// master answers errors through the store: from the SIGKILL until a claim
// on that shard succeeds again. The replica takes over after
// cluster-node-timeout (2s) and an election; the store then needs the
// new slot map. go-redis reloads it every ClusterStateReloadInterval (60s
// by default) or after a redirect, and a dead master sends none: the
// store reloads it after every connection error, and idem's DSN sets the
// interval to 1s (cluster_refresh). The issue measured about 55s before.
//
// IDEM_MEASURE_CLUSTER_BEFORE=1 also measures go-redis's defaults without
// the store's reload (a minute or so), to compare.
func TestClusterFailoverWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster with replicas and kills a master")
	}
	t.Parallel()
	cases := []struct {
		name     string
		refresh  time.Duration
		noReload bool
		bound    time.Duration
	}{{"cluster_refresh=1s", time.Second, false, 15 * time.Second}}
	if os.Getenv("IDEM_MEASURE_CLUSTER_BEFORE") == "1" {
		cases = append(cases,
			struct {
				name     string
				refresh  time.Duration
				noReload bool
				bound    time.Duration
			}{"reload on errors only (interval 60s)", 0, false, 15 * time.Second},
			struct {
				name     string
				refresh  time.Duration
				noReload bool
				bound    time.Duration
			}{"before: go-redis defaults", 0, true, 90 * time.Second})
	}
	ports := []int{7330, 7350, 7360}
	for i, tc := range cases {
		rc := startReplCluster(t, ports[i], false)
		c := rc.client(t, tc.refresh)
		st := newStoreOn(t, c, Config{})
		if tc.noReload {
			st.cluster = nil // what the store did before: no reload of its own
		}
		keys := rc.keysOnMaster(t, c, st, 1, 2000)
		ctx := context.Background()
		var kill time.Time
		var last error
		for n, k := range keys {
			if n == 50 {
				kill = time.Now()
				rc.masters[1].Kill()
			}
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := st.Claim(cctx, idem.ClaimParams{Scope: "failover", Key: k, AttemptID: "a", Fingerprint: idem.NewFingerprint([]byte(k)),
				Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
			cancel()
			switch {
			case n < 50 && err != nil:
				t.Fatalf("claim before the kill: %v", err)
			case n > 50 && err == nil:
				window := time.Since(kill)
				t.Logf("%s: the failed shard answered errors for %.1fs after its master was SIGKILLed (last: %v)", tc.name, window.Seconds(), last)
				if window > tc.bound {
					t.Errorf("%s: %.1fs of errors, want at most %s", tc.name, window.Seconds(), tc.bound)
				}
				goto next
			case err != nil:
				last = err
				time.Sleep(20 * time.Millisecond)
			}
			if n > 50 && time.Since(kill) > 2*tc.bound {
				t.Fatalf("%s: no claim succeeded %s after the kill: %v", tc.name, 2*tc.bound, last)
			}
		}
		t.Fatalf("%s: ran out of keys", tc.name)
	next:
	}
}
