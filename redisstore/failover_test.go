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

// startOwnCluster starts a 3-master cluster on portBase..portBase+2 with
// .ci/redis-cluster.sh and stops it when the test ends.
func startOwnCluster(t *testing.T, portBase int) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.Required() {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("SKIP: redis-server not found (%v)", err)
	}
	script, _ := filepath.Abs("../.ci/redis-cluster.sh")
	run := func(arg string) (string, error) {
		cmd := exec.Command("bash", script, arg)
		cmd.Env = append(os.Environ(), "PORT_BASE="+strconv.Itoa(portBase))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("start")
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Logf("stopping cluster: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("starting cluster on %d: %v\n%s", portBase, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "IDEM_TEST_REDIS_CLUSTER="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("cluster script printed no address:\n%s", out)
	return ""
}

// TestClusterMasterKilled races claims and effects over many keys on a
// cluster of its own and kills one master (SIGKILL) mid-run. Keys in the
// dead master's slots must fail with errors; no key may run its effect
// twice.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a Redis Cluster")
	}
	const portBase = 7100
	addrs := startOwnCluster(t, portBase)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: strings.Split(addrs, ","), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: 1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { c.Close() })
	// The cluster dies with the test, so no key cleanup.
	s, err := New(c, Config{Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	victim := fmt.Sprint("127.0.0.1:", portBase+1)
	pid := serverPID(t, victim)

	const keys, goroutines = 300, 8
	effects := make([]atomic.Int64, keys)
	var claimed, errs atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
				if claimed.Load() >= keys/3 {
					killOnce.Do(func() {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						close(killed)
						// Keep racing for a bounded while after the kill.
						time.AfterFunc(2*time.Second, cancel)
					})
				}
				raceOne(ctx, s, k, fmt.Sprint("g", g, "-", k), &effects[k], &claimed, &errs)
			}
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatal("the run ended before the master was killed")
	}
	for k := range effects {
		if n := effects[k].Load(); n > 1 {
			t.Errorf("key %d ran its effect %d times", k, n)
		}
	}
	t.Logf("claims acknowledged: %d of %d keys; store errors: %d", claimed.Load(), keys, errs.Load())
	if errs.Load() == 0 {
		t.Fatal("no store errors after a master was killed: the kill did not happen or errors were swallowed")
	}
}

// raceOne claims key k and, if claimed, runs the effect and records it.
func raceOne(ctx context.Context, s *Store, k int, attempt string, effect, claimed, errs *atomic.Int64) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := idem.ClaimParams{Scope: "f", Key: fmt.Sprint("k", k), AttemptID: attempt,
		Fingerprint: idem.NewFingerprint([]byte("same")), Now: now, LeaseUntil: now.Add(time.Hour)}
	res, err := s.Claim(ctx, p)
	if err != nil {
		if ctx.Err() == nil { // count the cluster's errors, not the test's own cancel
			errs.Add(1)
		}
		return
	}
	if !res.Claimed {
		return
	}
	claimed.Add(1)
	effect.Add(1)
	_, err = s.Finish(ctx, idem.FinishParams{Scope: p.Scope, Key: p.Key, Fence: res.Record.Fence, AttemptID: attempt,
		State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		errs.Add(1)
	}
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
