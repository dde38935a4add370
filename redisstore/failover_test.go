package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// ownCluster is a 3-master cluster a test started for itself with
// .ci/redis-cluster.sh on portBase..portBase+2.
type ownCluster struct {
	script   string
	portBase int
	env      []string // persistence settings for the script
	addrs    string
}

// startOwnCluster starts a 3-master cluster on portBase..portBase+2 with
// .ci/redis-cluster.sh, with env (e.g. "APPENDONLY=yes") added to the
// script's environment, and stops it when the test ends.
func startOwnCluster(t *testing.T, portBase int, env ...string) *ownCluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.Required() {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("SKIP: redis-server not found (%v)", err)
	}
	script, _ := filepath.Abs("../.ci/redis-cluster.sh")
	oc := &ownCluster{script: script, portBase: portBase, env: env}
	out, err := oc.run("start")
	t.Cleanup(func() {
		if out, err := oc.run("stop"); err != nil {
			t.Logf("stopping cluster: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("starting cluster on %d: %v\n%s", portBase, err, out)
	}
	if oc.addrs = clusterAddrs(out); oc.addrs == "" {
		t.Fatalf("cluster script printed no address:\n%s", out)
	}
	return oc
}

func (oc *ownCluster) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{oc.script}, args...)...)
	cmd.Env = append(os.Environ(), "PORT_BASE="+strconv.Itoa(oc.portBase))
	cmd.Env = append(cmd.Env, oc.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// restart starts the (killed) node on port again with its own arguments,
// cluster config and dir, and returns once every node reports
// cluster_state:ok.
func (oc *ownCluster) restart(t *testing.T, port int) {
	t.Helper()
	if out, err := oc.run("restart", strconv.Itoa(port)); err != nil || clusterAddrs(out) == "" {
		t.Fatalf("restarting the node on %d: %v\n%s", port, err, out)
	}
}

func clusterAddrs(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "IDEM_TEST_REDIS_CLUSTER="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestClusterMasterKilled is the failover test on a cluster whose nodes
// fsync every write before answering (appendonly yes, appendfsync
// always). Claims race over keys; once about a third of them are
// acknowledged (some of them by the victim), one master is SIGKILLed,
// the race goes on against the outage, the master is restarted and the
// cluster is ok again. Then a second race, with new attempt ids as a
// retry after a crash would use, goes over every key. Every claim the
// cluster acknowledged before the kill must still be there: no key may
// run its effect twice.
//
// A SIGKILL is a process crash: the kernel keeps what Redis wrote to its
// AOF, so this shows that the restarted master reloads every claim it
// acknowledged. It cannot show what appendfsync always adds over
// everysec, which is surviving a machine crash or power loss.
//
// TestClusterMasterKilledNoAOF is its negative control: the same scenario
// on nodes that keep nothing on disk shows that this test does catch lost
// claims.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts, kills and restarts a Redis Cluster master")
	}
	r := runMasterKilled(t, 7100, "APPENDONLY=yes", "APPENDFSYNC=always")
	if r.victimKeysAfterRestart < int64(r.victimAcked) {
		t.Errorf("the restarted master holds %d keys, fewer than the %d claims it acknowledged", r.victimKeysAfterRestart, r.victimAcked)
	}
	if len(r.reclaimed) > 0 {
		t.Errorf("%d keys whose claim the cluster acknowledged in the first race were claimed again after the restart: %v", len(r.reclaimed), r.reclaimed)
	}
	for k, n := range r.effects {
		if n > 1 {
			t.Errorf("key %d ran its effect %d times", k, n)
		}
	}
}

// TestClusterMasterKilledNoAOF runs TestClusterMasterKilled's scenario on
// a cluster with no RDB save points and appendonly no. The killed master
// comes back with its slots but none of its keys, so every claim it
// acknowledged before it died is lost and the retry claims that key
// again: its effect runs twice. This is the durability caveat of the
// package doc, and the proof that TestClusterMasterKilled can fail.
func TestClusterMasterKilledNoAOF(t *testing.T) {
	if testing.Short() {
		t.Skip("starts, kills and restarts a Redis Cluster master")
	}
	r := runMasterKilled(t, 7200, "APPENDONLY=no")
	if r.victimKeysAfterRestart != 0 {
		t.Fatalf("the restarted master holds %d keys; without persistence it should come back empty", r.victimKeysAfterRestart)
	}
	dups := 0
	for k, n := range r.effects {
		if n > 1 {
			dups++
			if !r.onVictim[k] || !r.acked[k] {
				t.Errorf("key %d ran its effect %d times but was not a claim the victim acknowledged", k, n)
			}
		}
	}
	t.Logf("duplicate effects without AOF: %d keys (the victim acknowledged %d claims before it died)", dups, r.victimAcked)
	if dups == 0 {
		t.Fatal("no duplicate effects after restarting an empty master: the failover test could not catch a lost claim")
	}
	if dups != r.victimAcked {
		t.Errorf("%d duplicates, want one per claim the victim acknowledged (%d)", dups, r.victimAcked)
	}
}

// masterKilled is what runMasterKilled saw.
type masterKilled struct {
	effects                []int64 // effects run per key, over both races
	acked                  []bool  // claim acknowledged in the first race
	onVictim               []bool  // the key's slot is on the killed master
	victimAcked            int     // acknowledged claims on the victim
	reclaimed              []int   // keys acked in the first race, claimed in the second
	victimKeysAfterRestart int64   // DBSIZE of the victim after its restart
}

// runMasterKilled runs the scenario of TestClusterMasterKilled on a
// cluster of its own on portBase, started with env, and checks what holds
// on any cluster: the kill happened after the victim acknowledged claims,
// the outage showed as store errors, the master came back as a new
// process, and the retry got an answer for every key.
func runMasterKilled(t *testing.T, portBase int, env ...string) masterKilled {
	t.Helper()
	oc := startOwnCluster(t, portBase, env...)
	// timeout bounds dials, reads and writes: short while a master is
	// down, so the race meets the outage; patient for the retry, so a slow
	// answer from the healthy cluster is not mistaken for an outage.
	newClient := func(timeout time.Duration) *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: strings.Split(oc.addrs, ","), DialTimeout: timeout / 2,
			ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: 1,
			DialerRetries: 1,
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The cluster dies with the test, so no key cleanup.
	prefix := uniquePrefix(t)
	newStore := func(c *redis.ClusterClient) *Store {
		s, err := New(c, Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	c1 := newClient(500 * time.Millisecond)
	s1 := newStore(c1)
	victimPort := portBase + 1
	victim := fmt.Sprint("127.0.0.1:", victimPort)
	pid := serverPID(t, victim)

	const keys, goroutines = 300, 8
	const minVictimAcked = 20  // the victim must hold acknowledged claims when it dies
	const outage = time.Second // shorter than the node timeout: no FAIL to undo
	r := masterKilled{effects: make([]int64, keys), acked: make([]bool, keys), onVictim: make([]bool, keys)}
	for k := range keys {
		m, err := c1.MasterForKey(context.Background(), s1.recKey("f", fmt.Sprint("k", k)))
		if err != nil {
			t.Fatal(err)
		}
		r.onVictim[k] = m.Options().Addr == victim
	}

	// First race: kill the victim once a third of the keys are claimed and
	// the victim acknowledged at least minVictimAcked of them.
	effects := make([]atomic.Int64, keys)
	acked := make([]atomic.Bool, keys)
	var claimed, victimAcked, errs, errsBeforeKill, claimedAtKill, victimAckedAtKill atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	killed := make(chan struct{})
	var killOnce sync.Once
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := (i + g*(keys/goroutines)) % keys
				if claimed.Load() >= keys/3 && victimAcked.Load() >= minVictimAcked {
					killOnce.Do(func() {
						errsBeforeKill.Store(errs.Load())
						claimedAtKill.Store(claimed.Load())
						victimAckedAtKill.Store(victimAcked.Load())
						if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
							t.Errorf("killing the master on %s: %v", victim, err)
						}
						close(killed)
						// Keep racing against the outage for a bounded while.
						time.AfterFunc(outage, cancel)
					})
				}
				ok := raceOne(ctx, s1, k, fmt.Sprint("g", g, "-", k), &effects[k], &claimed, &errs)
				if ok == answerClaimed {
					acked[k].Store(true)
					if r.onVictim[k] {
						victimAcked.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("the run ended before the master was killed (claimed %d, by the victim %d)", claimed.Load(), victimAcked.Load())
	}
	<-ctx.Done() // the outage lasts its full length
	outageErrs := errs.Load() - errsBeforeKill.Load()
	onVictim := 0
	for _, v := range r.onVictim {
		if v {
			onVictim++
		}
	}
	t.Logf("first race: killed %s (which serves %d of the %d keys) after %d claims, %d of them its own; by the end %d claims acknowledged, %d by the victim; store errors: %d before the kill, %d during the outage",
		victim, onVictim, keys, claimedAtKill.Load(), victimAckedAtKill.Load(), claimed.Load(), victimAcked.Load(), errsBeforeKill.Load(), outageErrs)
	if outageErrs == 0 {
		t.Fatal("no store errors after a master was killed: the kill did not happen or errors were swallowed")
	}

	start := time.Now()
	oc.restart(t, victimPort)
	if newPID := serverPID(t, victim); newPID == pid {
		t.Fatalf("the master on %s still runs as pid %d: it was not killed", victim, pid)
	}
	vc := redis.NewClient(&redis.Options{Addr: victim})
	defer vc.Close()
	n, err := vc.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	r.victimKeysAfterRestart = n
	t.Logf("restarted %s: cluster ok after %v; it holds %d keys", victim, time.Since(start).Round(time.Millisecond), n)

	// Second race, as the retry after a crash: a new client and store, new
	// attempt ids, every key, until each key got an answer.
	s2 := newStore(newClient(3 * time.Second))
	reclaimed := make([]atomic.Bool, keys)
	answered := make([]atomic.Bool, keys)
	var claimed2, errs2 atomic.Int64
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := (i + g*(keys/goroutines)) % keys
				for ctx2.Err() == nil {
					switch raceOne(ctx2, s2, k, fmt.Sprint("retry-g", g, "-", k), &effects[k], &claimed2, &errs2) {
					case answerClaimed:
						reclaimed[k].Store(true)
					case answerError:
						time.Sleep(10 * time.Millisecond)
						continue
					}
					answered[k].Store(true)
					break
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("retry race: %d keys claimed, %d store errors", claimed2.Load(), errs2.Load())
	for k := range keys {
		if !answered[k].Load() {
			t.Fatalf("key %d got no answer from the restarted cluster within the retry race", k)
		}
		r.effects[k] = effects[k].Load()
		r.acked[k] = acked[k].Load()
		if r.acked[k] && reclaimed[k].Load() {
			r.reclaimed = append(r.reclaimed, k)
		}
	}
	r.victimAcked = int(victimAcked.Load())
	return r
}

// The answers raceOne reports.
const (
	answerError   = iota // the store answered with an error
	answerClaimed        // claimed: the effect ran
	answerHeld           // someone else holds or held the key
)

// raceOne claims key k and, if claimed, runs the effect and records it.
func raceOne(ctx context.Context, s *Store, k int, attempt string, effect, claimed, errs *atomic.Int64) int {
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := idem.ClaimParams{Scope: "f", Key: fmt.Sprint("k", k), AttemptID: attempt,
		Fingerprint: idem.NewFingerprint([]byte("same")), Now: now, LeaseUntil: now.Add(time.Hour)}
	res, err := s.Claim(ctx, p)
	if err != nil {
		if ctx.Err() == nil { // count the cluster's errors, not the test's own cancel
			errs.Add(1)
		}
		return answerError
	}
	if !res.Claimed {
		return answerHeld
	}
	claimed.Add(1)
	effect.Add(1)
	_, err = s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: res.Record.Fence, AttemptID: attempt,
		State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil && ctx.Err() == nil {
		errs.Add(1)
	}
	return answerClaimed
}

func serverPID(t *testing.T, addr string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}
