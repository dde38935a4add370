package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// TestFailover kills a primary with SIGKILL under concurrent first-time
// traffic, each request sent twice as at-least-once delivery does, with
// the replication link stalled for the last half second, promotes the
// replica, retries every key on it and counts the effects that ran twice.
//
//   - asynchronous (the setup CheckReplication refuses; the engine runs
//     only because AllowAsyncReplication is set): the claims the primary
//     acknowledged after the stall are not on the promoted replica, and
//     their retries run the effect again. Duplicates > 0, every run: the
//     negative control that shows the check matters.
//   - semi-synchronous AFTER_SYNC (safe): a claim is acknowledged only
//     once the replica has it, so after the stall claims wait instead of
//     running effects. 0 duplicates.
func TestFailover(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		semiSync  bool
		ports     [2]int
		wantDupes bool
	}{
		{"asynchronous", false, [2]int{portFailoverP, portFailoverR}, true},
		{"semi-sync AFTER_SYNC", true, [2]int{portFailoverP + 2, portFailoverR + 2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runFailover(t, c.semiSync, c.ports)
			t.Logf("%s: %d keys, %d effects, %d duplicates (%d effects ran on the old primary after the stall); %d unknown outcomes; failover and retries took %s",
				c.name, r.keys, r.effects, r.dupes, r.afterStall, r.unknown, r.retryTime.Round(time.Millisecond))
			if c.wantDupes && r.dupes == 0 {
				t.Fatalf("asynchronous replica, stalled link: no duplicate effect; the negative control shows nothing")
			}
			if !c.wantDupes && r.dupes != 0 {
				t.Fatalf("semi-synchronous AFTER_SYNC: %d effects ran twice", r.dupes)
			}
		})
	}
}

type failoverResult struct {
	keys, effects, dupes, afterStall, unknown int
	retryTime                                 time.Duration
}

func runFailover(t *testing.T, semiSync bool, ports [2]int) failoverResult {
	rp := startReplicaPair(t, ports[0], ports[1])
	if semiSync {
		rp.enableSemiSync(t, "AFTER_SYNC", 60000)
	}
	st := openStore(t, rp.primary.DSN, true)
	cfg := idem.Config{Lease: time.Second, FinishTimeout: time.Second}
	if !semiSync {
		// The check refuses this setup; the engine runs only when told.
		if _, err := idem.New(st, cfg); !errors.Is(err, idem.ErrUnsafeReplication) {
			t.Fatalf("idem.New on an asynchronous primary = %v, want ErrUnsafeReplication", err)
		}
		cfg.AllowAsyncReplication = true
	}
	e, err := idem.New(st, cfg)
	if err != nil {
		t.Fatalf("idem.New on the primary: %v", err)
	}
	return failover(t, e, rp.relay.Stall, rp.primary.Kill, func() idem.Store {
		// Promote the replica: let it apply what it received, stop
		// replicating, and take writes.
		execAll(t, rp.r, "STOP SLAVE IO_THREAD")
		waitUntil(t, 20*time.Second, "the replica applies its relay log", func() bool {
			s := slaveStatus(t, rp.r)
			return s["Slave_SQL_Running"] == "Yes" && s["Relay_Master_Log_File"] == s["Master_Log_File"] &&
				s["Exec_Master_Log_Pos"] == s["Read_Master_Log_Pos"]
		})
		execAll(t, rp.r, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
		return openStore(t, rp.replica.DSN, false)
	})
}

// TestFailoverGalera: the same traffic on node 1 of a two-node Galera
// cluster; node 2 (pc.weight=2, so that it keeps quorum alone) hangs for
// the last half second (SIGSTOP), node 1 is killed with SIGKILL, node 2
// resumes, and every key is retried on it. A commit on node 1 needs node
// 2 to receive it, so while node 2 hangs claims wait (and then fail when
// node 1 loses quorum) instead of running effects: 0 duplicates.
func TestFailoverGalera(t *testing.T) {
	t.Parallel()
	provider := testenv.GaleraProvider(t)
	srv := testenv.NewMariaDBServers(t)
	n1 := galeraNode(t, srv, provider, portGaleraF, portGcommF, 0)
	n2 := galeraNode(t, srv, provider, portGaleraF, portGcommF, 1, "pc.weight=2")
	waitSynced(t, n1, n2)
	st := openStore(t, n1.DSN, true)
	e, err := idem.New(st, idem.Config{Lease: time.Second, FinishTimeout: time.Second})
	if err != nil {
		t.Fatalf("idem.New on a Galera node: %v", err)
	}
	r := failover(t, e, n2.Stall, n1.Kill, func() idem.Store {
		n2.Resume()
		db2 := admin(t, n2.DSN)
		waitUntil(t, 30*time.Second, "node 2 forms a Primary component alone", func() bool {
			return tryVariable(db2, "SHOW GLOBAL STATUS", "wsrep_cluster_status") == "Primary" &&
				tryVariable(db2, "SHOW GLOBAL STATUS", "wsrep_ready") == "ON"
		})
		return openStore(t, n2.DSN, false)
	})
	t.Logf("Galera: %d keys, %d effects, %d duplicates (%d effects ran on node 1 after node 2 hung); %d unknown outcomes; failover and retries took %s",
		r.keys, r.effects, r.dupes, r.afterStall, r.unknown, r.retryTime.Round(time.Millisecond))
	if r.dupes != 0 {
		t.Fatalf("Galera: %d effects ran twice", r.dupes)
	}
}

// failover runs first-time traffic through e (8 callers, every request
// sent twice, as at-least-once delivery does) for 300 ms, calls stall,
// goes on for 500 ms, calls kill, and then retries every key on the store
// promote returns, until each has an outcome. It counts the effects.
func failover(t *testing.T, e *idem.Engine, stall, kill func(), promote func() idem.Store) failoverResult {
	var (
		mu         sync.Mutex
		effects    = map[string]int{}
		stalled    atomic.Bool // the link is stalled and the old primary serves
		afterStall atomic.Int64
		next       atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	effect := func(key string) idem.Handler {
		return func(context.Context, *idem.Attempt) ([]byte, error) {
			mu.Lock()
			effects[key]++
			mu.Unlock()
			if stalled.Load() {
				afterStall.Add(1)
			}
			return []byte("v"), nil
		}
	}
	do := func(e *idem.Engine, key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := e.DoBytes(ctx, idem.Request{Key: idem.Key(key)}, effect(key))
		return err
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%05d", next.Add(1))
				var sent sync.WaitGroup
				for range 2 { // at-least-once delivery: every request twice
					sent.Add(1)
					go func() { defer sent.Done(); _ = do(e, key) }()
				}
				sent.Wait()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	stall()
	stalled.Store(true)
	time.Sleep(500 * time.Millisecond)
	kill()
	close(stop)
	wg.Wait()
	e.Close()
	stalled.Store(false)

	start := time.Now()
	e2, err := idem.New(promote(), idem.Config{Lease: time.Second})
	if err != nil {
		t.Fatalf("idem.New after the failover: %v", err)
	}
	defer e2.Close()

	// Retry every key until it has an outcome: the effect runs again for
	// every claim the promoted server never received.
	keys := int(next.Load())
	var unknown atomic.Int64
	work := make(chan string)
	var rwg sync.WaitGroup
	for range 8 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for key := range work {
				for i := 0; ; i++ {
					err := do(e2, key)
					if err == nil {
						break
					}
					if errors.Is(err, idem.ErrUnknownOutcome) {
						unknown.Add(1) // claimed, outcome lost: never re-run
						break
					}
					if i == 200 {
						t.Errorf("key %s: no outcome after %d retries: %v", key, i, err)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	for i := 1; i <= keys; i++ {
		work <- fmt.Sprintf("k%05d", i)
	}
	close(work)
	rwg.Wait()

	r := failoverResult{keys: keys, afterStall: int(afterStall.Load()), unknown: int(unknown.Load()), retryTime: time.Since(start)}
	for _, n := range effects {
		r.effects += n
		if n > 1 {
			r.dupes += n - 1
		}
	}
	return r
}

// slaveStatus reads SHOW SLAVE STATUS's one row (empty when none).
func slaveStatus(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	m := map[string]string{}
	if rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			m[c] = vals[i].String
		}
	}
	return m
}
