package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// sentinelSet is a primary with two replicas and three Sentinels that a
// test started on its own ports. Each replica replicates through a relay
// the test controls. replica1 has replica-priority 10 and replica2 100:
// Sentinel promotes replica1 whenever it is eligible.
type sentinelSet struct {
	name               string
	primary            *testenv.RedisNode
	replica1, replica2 *testenv.RedisNode
	link1, link2       *testenv.Relay
	sentinels          []*testenv.RedisNode
}

// startSentinelSet starts the set on base..base+2 (primary, replica1,
// replica2) and sentinelBase..sentinelBase+2, every node with appendonly
// yes (a restart is not what loses claims here), and returns once every
// Sentinel knows both replicas and the other two Sentinels.
func startSentinelSet(t *testing.T, base, sentinelBase int) *sentinelSet {
	t.Helper()
	persist := []string{"--appendonly", "yes", "--appendfsync", "everysec"}
	s := &sentinelSet{name: "idemtest" + strconv.Itoa(base)}
	s.primary = testenv.StartRedisNode(t, base, persist...)
	s.link1 = testenv.StartRelay(t, s.primary.Addr())
	s.link2 = testenv.StartRelay(t, s.primary.Addr())
	s.replica1 = testenv.StartRedisNode(t, base+1, append(persist, "--replicaof", "127.0.0.1", strconv.Itoa(s.link1.Port()), "--replica-priority", "10")...)
	s.replica2 = testenv.StartRedisNode(t, base+2, append(persist, "--replicaof", "127.0.0.1", strconv.Itoa(s.link2.Port()), "--replica-priority", "100")...)
	replicaOnline(t, s.primary.Addr(), 2)
	for i := range 3 {
		// failover-timeout starts long: a Sentinel "fixes" a replica whose
		// master address is not the primary's (here, the relay) once it
		// has been known for that long. It is shortened after the kill.
		s.sentinels = append(s.sentinels, testenv.StartSentinel(t, sentinelBase+i, s.name, s.primary.Addr(), 2,
			"sentinel down-after-milliseconds "+s.name+" 1000",
			"sentinel failover-timeout "+s.name+" 60000",
			"sentinel parallel-syncs "+s.name+" 2"))
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
		for {
			m, err := sc.Master(context.Background(), s.name).Result()
			if err == nil && m["num-other-sentinels"] == "2" && m["num-slaves"] == "2" {
				break
			}
			if time.Now().After(deadline) {
				sc.Close()
				t.Fatalf("Sentinel %s does not see the set: %v %v\n%s", sn.Addr(), m, err, sn.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
		sc.Close()
	}
	return s
}

// failoverOptions are the options of a Sentinel client of the set.
func (s *sentinelSet) failoverOptions() *redis.FailoverOptions {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return &redis.FailoverOptions{MasterName: s.name, SentinelAddrs: addrs, PoolSize: 32,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 3 * time.Second, WriteTimeout: time.Second, // 3s: claims and WAITs pipelined
		MaxRetries: 1, PoolTimeout: 2 * time.Second}
}

// store returns a store on a Sentinel client of the set.
func (s *sentinelSet) store(t *testing.T, prefix string, wait *WaitConfig) *Store {
	t.Helper()
	fo := s.failoverOptions()
	c := redis.NewFailoverClient(fo)
	t.Cleanup(func() { c.Close() })
	st, err := New(c, Config{Prefix: prefix, Wait: wait, Sentinel: fo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// killPrimary SIGKILLs the primary, cuts both replication links (a dead
// primary's connections do not linger: what the stalled relay held never
// arrives), shortens the Sentinels' failover-timeout, and waits until the
// Sentinels name a new primary, which it returns with the seconds taken.
func (s *sentinelSet) killPrimary(t *testing.T) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	s.primary.Kill()
	s.link1.Cut()
	s.link2.Cut()
	ctx := context.Background()
	for _, sn := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
		if err := sc.Set(ctx, s.name, "failover-timeout", "4000").Err(); err != nil {
			t.Errorf("SENTINEL SET on %s: %v", sn.Addr(), err)
		}
		sc.Close()
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].Addr()})
	defer sc.Close()
	for {
		addr, err := sc.GetMasterAddrByName(ctx, s.name).Result()
		if err == nil && len(addr) == 2 && addr[0]+":"+addr[1] != s.primary.Addr() {
			return addr[0] + ":" + addr[1], time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no failover 30s after the kill (%v, %v)\n%s", addr, err, s.sentinels[0].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSentinelFailoverWaitAll is the failover test with the safe setting,
// wait_replicas=all: concurrent first-time intents, each sent twice; the
// link to replica1 (the replica Sentinel will promote) stalls halfway;
// claims made during the stall cannot reach replica1 and fail closed;
// the primary is SIGKILLed, Sentinel promotes replica1, the store follows
// through its Sentinel client, and every intent is retried. Every claim
// the primary acknowledged was on replica1 already: no effect runs twice.
//
// TestSentinelFailoverAsync is its negative control: the same history
// with claims that wait for one replica of two loses claims every run.
func TestSentinelFailoverWaitAll(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, two replicas and three Sentinels, and kills the primary")
	}
	t.Parallel()
	set := startSentinelSet(t, 7300, 26300)
	l := newFailoverLoad(t, 240, 0)
	wait := &WaitConfig{Replicas: AllReplicas, Timeout: 300 * time.Millisecond}
	st := set.store(t, l.prefix, wait)
	rep, err := st.CheckReplication(context.Background())
	if err != nil || !rep.Safe() {
		t.Fatalf("CheckReplication = %+v, %v; want safe", rep, err)
	}
	t.Logf("topology: %s", rep.Topology)
	e, err := l.engine(st, false)
	if err != nil {
		t.Fatalf("New refuses wait_replicas=all: %v", err)
	}
	stop := make(chan struct{})
	var stallAt time.Time
	sent := l.firstPhase(e, 8, func() {
		set.link1.Stall()
		stallAt = time.Now()
		l.phase.Store(phaseStall)
		time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	}, stop)
	stalledFor := time.Since(stallAt)
	l.phase.Store(phaseAfter)
	newPrimary, took := set.killPrimary(t)
	t.Logf("sent %d of %d intents before the kill; effects ran: %d before the stall, %d by sends started during it (%v); Sentinel promoted %s %.1fs after the kill",
		sent, l.keys, l.effectsIn[phaseBefore].Load(), l.effectsIn[phaseStall].Load(), stalledFor.Round(time.Millisecond), newPrimary, took.Seconds())
	if newPrimary != set.replica1.Addr() {
		t.Fatalf("Sentinel promoted %s, not replica1 (%s): the test did not exercise the stalled replica", newPrimary, set.replica1.Addr())
	}
	if n := l.effectsIn[phaseStall].Load(); n != 0 {
		t.Errorf("%d effects ran on claims made while replica1 could not acknowledge them: wait_replicas=all must fail them closed", n)
	}
	unanswered, firstOK := l.retryAll(e, 8, 25*time.Second)
	l.wg.Wait()
	dups := l.duplicates()
	t.Logf("retry: first success %.1fs after promotion; %d effects in all; %d duplicates; %d lost claims detected", firstOK.Seconds(), l.effectsRun(), len(dups), l.lostClaims.Load())
	if unanswered > 0 {
		t.Errorf("%d intents got no answer after the failover", unanswered)
	}
	if len(dups) > 0 {
		t.Errorf("%d intents ran their effect more than once: %v", len(dups), dups)
	}
	if l.lostClaims.Load() != 0 {
		t.Errorf("%d claims lost in the failover with wait_replicas=all", l.lostClaims.Load())
	}
}

// TestSentinelFailoverAsync is the negative control of
// TestSentinelFailoverWaitAll: claims wait for one replica of two
// (wait_replicas=1), which replica2 gives while replica1's link is
// stalled. idem.New refuses the setup (as it refuses claims that do not
// wait at all); with AllowAsyncReplication it runs, Sentinel promotes
// replica1 (replica-priority), which never received those claims, and
// their retries run the effect again — every run. Outcomes written after
// the failover for claims the new primary never had are reported as
// lost claims (idem.ErrStoreLostClaim), never as fenced: one whose key a
// retry claimed meanwhile, one whose record is simply gone (written back).
func TestSentinelFailoverAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, two replicas and three Sentinels, and kills the primary")
	}
	t.Parallel()
	set := startSentinelSet(t, 7303, 26303)
	const slow = 4
	l := newFailoverLoad(t, 240, slow)
	for _, w := range []*WaitConfig{nil, {Replicas: 1, Timeout: 300 * time.Millisecond}} {
		st := set.store(t, l.prefix, w)
		_, err := l.engine(st, false)
		var rerr *idem.ReplicationError
		if !errors.Is(err, idem.ErrUnsafeReplication) || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "asynchronous replication") {
			t.Fatalf("New with Wait %+v = %v, want ErrUnsafeReplication", w, err)
		}
		t.Logf("refused: %v", err)
	}
	st := set.store(t, l.prefix, &WaitConfig{Replicas: 1, Timeout: 300 * time.Millisecond})
	e, err := l.engine(st, true)
	if err != nil {
		t.Fatal(err)
	}

	// Four intents whose effects are running when the primary dies and
	// finish after the failover: two of them are re-sent first (a retry
	// claims the key afresh on the new primary), two are not.
	slowKeys := make([]int, slow)
	release := make(chan struct{})
	slowErrs := make([]error, slow)
	var slowStarted, slowDone sync.WaitGroup
	startSlow := func() {
		for i := range slow {
			k := l.keys + i
			slowKeys[i] = k
			slowStarted.Add(1)
			slowDone.Add(1)
			go func() {
				defer slowDone.Done()
				var once sync.Once
				_, slowErrs[i] = e.DoBytes(context.Background(), l.request(k), func(context.Context, *idem.Attempt) ([]byte, error) {
					once.Do(slowStarted.Done)
					l.effects[k].Add(1)
					<-release
					return []byte("slow"), nil
				})
				once.Do(slowStarted.Done) // the claim failed: nothing ran
			}()
		}
	}

	stop := make(chan struct{})
	sent := l.firstPhase(e, 8, func() {
		set.link1.Stall()
		l.phase.Store(phaseStall)
		startSlow()
		time.AfterFunc(500*time.Millisecond, func() { close(stop) })
	}, stop)
	slowStarted.Wait()
	l.phase.Store(phaseAfter)
	newPrimary, took := set.killPrimary(t)
	acked := l.effectsIn[phaseStall].Load()
	t.Logf("sent %d of %d intents before the kill; effects ran: %d before the stall, %d by sends started during it; Sentinel promoted %s %.1fs after the kill",
		sent, l.keys, l.effectsIn[phaseBefore].Load(), acked, newPrimary, took.Seconds())
	if newPrimary != set.replica1.Addr() {
		t.Fatalf("Sentinel promoted %s, not replica1 (%s)", newPrimary, set.replica1.Addr())
	}
	if acked == 0 {
		t.Fatal("no claim was acknowledged during the stall: the control cannot lose any")
	}
	// Re-send two of the slow intents until one claims afresh: the new
	// primary never had their claims.
	for _, k := range slowKeys[:2] {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for {
			if _, err := l.send(ctx, e, k); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}
	close(release)
	slowDone.Wait()
	for i, err := range slowErrs {
		k := slowKeys[i]
		switch {
		case i < 2 && (!errors.Is(err, idem.ErrStoreLostClaim) || errors.Is(err, idem.ErrFenced) || strings.Contains(err.Error(), "fenced")):
			t.Errorf("slow intent %d, re-claimed by a retry: %v, want ErrStoreLostClaim (not fenced)", k, err)
		case i >= 2 && err != nil:
			t.Errorf("slow intent %d, its record gone: %v, want its outcome written back", k, err)
		}
	}
	unanswered, _ := l.retryAll(e, 8, 25*time.Second)
	l.wg.Wait()
	dups := l.duplicates()
	t.Logf("duplicate effects with wait_replicas=1 of 2: %d of %d intents (%d claims acknowledged during the stall, %d slow intents re-sent); lost claims detected: %d",
		len(dups), l.keys+slow, acked, 2, l.lostClaims.Load())
	if unanswered > 0 {
		t.Errorf("%d intents got no answer after the failover", unanswered)
	}
	if len(dups) == 0 {
		t.Fatal("no duplicate effect: the negative control did not lose the claims replica1 never received")
	}
	if l.lostClaims.Load() < slow {
		t.Errorf("%d lost claims detected, want at least the %d slow intents'", l.lostClaims.Load(), slow)
	}
	for _, k := range slowKeys[2:] {
		if n := l.effects[k].Load(); n != 1 {
			t.Errorf("slow intent %d, written back, ran %d times", k, n)
		}
	}
	// Every slow intent now replays: the re-claimed ones their retry's
	// outcome, the others the outcome written back.
	for _, k := range slowKeys {
		res, err := l.send(context.Background(), e, k)
		if err != nil || !res.Replayed {
			t.Errorf("slow intent %d re-sent: %+v, %v; want a replay", k, res, err)
		}
	}
}
