package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// The failover tests run an engine on a primary with a streaming standby,
// kill the primary with SIGKILL while the replication link is stalled,
// promote the standby, and retry every intent through the same store,
// whose multi-host DSN (target_session_attrs=read-write) follows the
// promotion without a restart. A counting effect records how many times
// each intent ran.

// effects counts the runs of each key's effect, and when they started.
type effects struct {
	mu     sync.Mutex
	runs   map[string]int
	starts []time.Time
}

func newEffects() *effects { return &effects{runs: map[string]int{}} }

func (e *effects) handler(key string) idem.Handler {
	return func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		e.mu.Lock()
		e.runs[key]++
		e.starts = append(e.starts, time.Now())
		e.mu.Unlock()
		time.Sleep(2 * time.Millisecond) // an effect takes a moment
		return []byte("done " + key), nil
	}
}

// count returns how many times key's effect ran.
func (e *effects) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// duplicates counts keys whose effect ran more than once, and the keys
// that ran at all.
func (e *effects) duplicates() (dups, ran int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.runs {
		ran++
		if n > 1 {
			dups++
		}
	}
	return dups, ran
}

// startedBetween counts effects that started in [from, to).
func (e *effects) startedBetween(from, to time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.starts {
		if !s.Before(from) && s.Before(to) {
			n++
		}
	}
	return n
}

// tally counts the answers the traffic got, by kind.
type tally struct {
	mu     sync.Mutex
	kinds  map[string]int
	sample string // one "store unavailable"
}

func (t *tally) add(err error) {
	kind, sample := "ok", ""
	switch {
	case err == nil:
	case errors.Is(err, pgstore.ErrNotReplicated):
		kind = "not replicated (503)"
	case errors.Is(err, idem.ErrStoreLostClaim):
		kind = "lost claim"
	case errors.Is(err, idem.ErrStoreUnavailable):
		kind, sample = "store unavailable (503)", err.Error()
	case errors.Is(err, idem.ErrInFlight):
		kind = "in flight"
	case errors.Is(err, idem.ErrUnknownOutcome):
		kind = "unknown"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "deadline"
	default:
		kind = "other: " + err.Error()
	}
	t.mu.Lock()
	if t.kinds == nil {
		t.kinds = map[string]int{}
	}
	t.kinds[kind]++
	if t.sample == "" {
		t.sample = sample
	}
	t.mu.Unlock()
}

func (t *tally) get(kind string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kinds[kind]
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sample != "" {
		return fmt.Sprintf("%v (e.g. %s)", t.kinds, t.sample)
	}
	return fmt.Sprint(t.kinds)
}

// claimCounter is the store with its Claim calls counted: those that
// failed closed because the standby did not confirm them.
type claimCounter struct {
	*pgstore.Store
	notReplicated atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	res, err := c.Store.Claim(ctx, p)
	if errors.Is(err, pgstore.ErrNotReplicated) && errors.Is(err, idem.ErrStoreUnavailable) {
		c.notReplicated.Add(1)
	}
	return res, err
}

func request(key string) idem.Request {
	return idem.Request{Scope: "failover", Key: idem.Key(key), Fingerprint: idem.NewFingerprint([]byte(key)), Operation: "charge"}
}

// failoverRun is the history of one run.
type failoverRun struct {
	keys              []string
	traffic, retries  tally
	stallAt, killAt   time.Time
	dups, ran         int
	duringStall       int // effects started in the stall, after its first 200 ms
	promotedPort      int
	retryRounds       int
	stallFor, runTime time.Duration
}

// runFailover drives concurrent first-time intents, each sent twice (at
// least once delivery: the second copy 0-20 ms after the first, so often
// while it runs), for warm, then stalls the replication link and keeps
// the traffic going for stall, kills the primary, promotes the standby,
// and retries every intent until it has an answer that is not an error
// of the store.
func runFailover(t *testing.T, p *pair, eng *idem.Engine, s *pgstore.Store, eff *effects, warm, stall time.Duration) *failoverRun {
	t.Helper()
	run := &failoverRun{stallFor: stall}
	begin := time.Now()
	d := &driver{eng: eng, eff: eff, sem: make(chan struct{}, 32)}
	tick := time.NewTicker(4 * time.Millisecond)
	stallAt := begin.Add(warm)
	killAt := stallAt.Add(stall)
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		now := <-tick.C
		if now.After(killAt) {
			break
		}
		if run.stallAt.IsZero() && now.After(stallAt) {
			p.relay.Stall()
			run.stallAt = time.Now()
		}
		key := "k" + itoa(i)
		run.keys = append(run.keys, key)
		wg.Add(2)
		go func() {
			defer wg.Done()
			run.traffic.add(d.send(key))
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			run.traffic.add(d.send(key))
		}()
	}
	tick.Stop()
	run.killAt = time.Now()
	p.failover(t)
	wg.Wait()

	// Retry every intent through the same store, which must find the
	// promoted standby by itself.
	if pending := d.retryAll(run, 20*time.Second); pending > 0 {
		t.Errorf("%d intents still without an answer 20 s after the failover", pending)
	}
	port, recovery, err := serverPort(context.Background(), s)
	if err != nil || recovery || port != p.standby.Port {
		t.Errorf("after the failover the store reaches port %d (in recovery %v, %v), want the promoted standby's %d", port, recovery, err, p.standby.Port)
	}
	run.promotedPort = port
	run.dups, run.ran = eff.duplicates()
	run.duringStall = eff.startedBetween(run.stallAt.Add(200*time.Millisecond), run.killAt)
	run.runTime = time.Since(begin)
	t.Logf("%d intents sent twice; traffic: %s; retries (%d rounds): %s; effects: %d keys ran, %d ran twice or more, %d started during the stall; %s in all",
		len(run.keys), &run.traffic, run.retryRounds, &run.retries, run.ran, run.dups, run.duringStall, run.runTime.Round(time.Millisecond))
	return run
}

// driver sends intents to the engine, at most cap(sem) at once.
type driver struct {
	eng *idem.Engine
	eff *effects
	sem chan struct{}
}

// send runs key's intent once, within 3 s.
func (d *driver) send(key string) error {
	d.sem <- struct{}{}
	defer func() { <-d.sem }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := d.eng.DoBytes(ctx, request(key), d.eff.handler(key))
	return err
}

// retryAll sends every key of run again, in rounds, until each has an
// answer that is not the store's failure or an attempt in flight, or
// until within has passed; it returns how many are left without one.
func (d *driver) retryAll(run *failoverRun, within time.Duration) int {
	deadline := time.Now().Add(within)
	pending := run.keys
	for len(pending) > 0 && time.Now().Before(deadline) {
		run.retryRounds++
		var next []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, key := range pending {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := d.send(key)
				if errors.Is(err, idem.ErrStoreUnavailable) || errors.Is(err, idem.ErrInFlight) || errors.Is(err, context.DeadlineExceeded) {
					mu.Lock()
					next = append(next, key)
					mu.Unlock()
					return
				}
				run.retries.add(err)
			}()
		}
		wg.Wait()
		pending = next
		if len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return len(pending)
}

// events records the replication events an engine reported.
type events struct {
	mu      sync.Mutex
	repl    []idem.Event
	lostErr error
}

func (e *events) Observe(_ context.Context, ev idem.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch ev.Kind {
	case idem.EventReplication:
		e.repl = append(e.repl, ev)
	case idem.EventLostClaim:
		e.lostErr = ev.Err
	}
}

func newEngine(t *testing.T, s idem.Store, cfg idem.Config) (*idem.Engine, error) {
	t.Helper()
	if cfg.Lease == 0 {
		cfg.Lease = time.Second
	}
	eng, err := idem.New(s, cfg)
	if err == nil {
		t.Cleanup(func() { eng.Close() })
	}
	return eng, err
}

// TestFailoverAsynchronousStandby is the negative control: on an
// asynchronous standby, idem.New refuses the store, and with
// AllowAsyncReplication the claims acknowledged while the link was
// stalled are lost in the failover, and their retries run the effect a
// second time.
func TestFailoverAsynchronousStandby(t *testing.T) {
	t.Parallel()
	p := startPair(t, false)
	s := p.openStore(t, pgstore.Config{})
	_, err := newEngine(t, s, idem.Config{})
	var rerr *idem.ReplicationError
	if !errors.Is(err, idem.ErrUnsafeReplication) || !errors.As(err, &rerr) || len(rerr.Findings) != 1 ||
		rerr.Findings[0].Setting != "synchronous_standby_names" {
		t.Fatalf("idem.New on an asynchronous standby: %v, want ErrUnsafeReplication naming synchronous_standby_names", err)
	}
	t.Logf("idem.New refused: %v", err)
	var ev events
	eng, err := newEngine(t, s, idem.Config{AllowAsyncReplication: true, Observer: &ev})
	if err != nil {
		t.Fatalf("idem.New with AllowAsyncReplication: %v", err)
	}
	if len(ev.repl) != 1 || ev.repl[0].Delta != 0 {
		t.Errorf("replication events %+v, want one with Delta 0 (unsafe)", ev.repl)
	}
	p.caughtUp(t)
	run := runFailover(t, p, eng, s, newEffects(), 300*time.Millisecond, time.Second)
	if run.dups == 0 {
		t.Errorf("no duplicate effect on an asynchronous standby: the negative control did not lose a claim")
	}
	if run.duringStall == 0 {
		t.Errorf("no effect ran during the stall")
	}
}

// TestFailoverSynchronousStandby: with a synchronous standby and
// ReplicatedClaims on (the server's synchronous_commit is local, so the
// store must raise it for claims), idem.New accepts the store, claims
// made while the link is stalled fail closed (503) instead of running,
// and no intent runs twice across the failover; with and without group
// commit.
func TestFailoverSynchronousStandby(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  pgstore.Config
	}{{"one statement a claim", pgstore.Config{Unbatched: true}}, {"group commit", pgstore.Config{}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startPair(t, true, "synchronous_commit=local")
			cfg := tc.cfg
			cfg.ReplicatedClaims, cfg.ReplicatedClaimTimeout = "on", 250*time.Millisecond
			s := p.openStore(t, cfg)
			counted := &claimCounter{Store: s}
			var ev events
			eng, err := newEngine(t, counted, idem.Config{Observer: &ev})
			if err != nil {
				t.Fatalf("idem.New on a synchronous standby with replicated claims: %v", err)
			}
			if len(ev.repl) != 1 || ev.repl[0].Delta != 1 {
				t.Errorf("replication events %+v, want one with Delta 1 (safe)", ev.repl)
			}
			p.caughtUp(t)
			run := runFailover(t, p, eng, s, newEffects(), 300*time.Millisecond, time.Second)
			t.Logf("claims that failed closed (ErrNotReplicated): %d", counted.notReplicated.Load())
			if run.dups != 0 {
				t.Errorf("%d intents ran twice across the failover of a synchronous standby", run.dups)
			}
			if run.duringStall != 0 {
				t.Errorf("%d effects started during the stall, on claims the standby never confirmed", run.duringStall)
			}
			if counted.notReplicated.Load() == 0 {
				t.Errorf("no claim failed closed during the stall: %s", &run.traffic)
			}
			if run.ran == 0 || run.retries.get("ok") == 0 {
				t.Errorf("nothing ran: %s / %s", &run.traffic, &run.retries)
			}
		})
	}
}

// TestOwnRowWaitsForStandby cancels a claim's wait for the synchronous
// standby (pg_cancel_backend, while the link is stalled): PostgreSQL
// reports the claim committed, with a warning. The store fails the claim;
// the engine retries it with the same attempt and finds its own row,
// which it must make durable on the standby before reporting it claimed —
// it cannot while the link is stalled, so the effect does not run. The
// primary dies, the standby is promoted without the row, and a retry runs
// the effect: once in all. Without the wait on the own row (or without
// the warning's detection) the effect runs during the stall and again
// after the failover: twice. The claim is a statement of its own, then a
// group-commit batch whose COMMIT waits.
func TestOwnRowWaitsForStandby(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  pgstore.Config
	}{{"one statement a claim", pgstore.Config{Unbatched: true}}, {"group commit", pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond}}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ownRowWaits(t, tc.cfg)
		})
	}
}

func ownRowWaits(t *testing.T, cfg pgstore.Config) {
	p := startPair(t, true, "synchronous_commit=local")
	cfg.ReplicatedClaims, cfg.ReplicatedClaimTimeout = "on", time.Minute
	s := p.openStore(t, cfg)
	eng, err := newEngine(t, s, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p.caughtUp(t)
	mon := connect(t, p.primary)
	ctx := context.Background()
	eff := newEffects()
	p.relay.Stall()

	done := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := eng.DoBytes(rctx, request("own"), eff.handler("own"))
		done <- err
	}()
	answered, reqErr := cancelFirstWait(ctx, t, mon, done)
	ranInStall := eff.count("own")
	p.failover(t)
	if !answered {
		reqErr = <-done
	}
	if reqErr == nil {
		t.Errorf("the request whose claim's wait was cancelled succeeded")
	} else {
		t.Logf("the request during the stall: %v", reqErr)
	}
	for i := 0; ; i++ {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := eng.DoBytes(rctx, request("own"), eff.handler("own"))
		cancel()
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("retry after the failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := eff.count("own"); n != 1 {
		t.Errorf("the effect ran %d times (%d during the stall), want once", n, ranInStall)
	}
}

// cancelFirstWait cancels the first backend it sees waiting for the
// standby (pg_cancel_backend), once, then returns when the engine's retry
// either waits for the standby again (a new waiter appears) or has run
// the effect and answered on done (so that its outcome, too, is on the
// primary alone when it dies): whether the request answered, and its
// error.
func cancelFirstWait(ctx context.Context, t *testing.T, mon *pgx.Conn, done <-chan error) (answered bool, err error) {
	t.Helper()
	cancelled := int32(0)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return true, err
		default:
		}
		pids, err := syncRepWaiters(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case cancelled == 0 && len(pids) == 1:
			cancelled = pids[0]
			var ok bool
			if err := mon.QueryRow(ctx, "SELECT pg_cancel_backend($1)", cancelled).Scan(&ok); err != nil || !ok {
				t.Fatalf("pg_cancel_backend(%d): %v %v", cancelled, ok, err)
			}
		case cancelled != 0 && len(pids) > 0 && pids[0] != cancelled:
			return false, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cancelled == 0 {
		t.Fatal("the claim never waited for the standby")
	}
	return false, nil
}

// TestLostClaimAfterFailover: on an asynchronous standby (allowed), an
// effect runs on a claim the standby never received; the primary dies
// and the standby is promoted while it runs. Its outcome write then
// finds no record: the engine reports the store lost the claim
// (ErrStoreLostClaim, not "fenced") and writes the known outcome back,
// so that retries replay it.
func TestLostClaimAfterFailover(t *testing.T) {
	t.Parallel()
	p := startPair(t, false)
	s := p.openStore(t, pgstore.Config{})
	var ev events
	var eng *idem.Engine
	var err error
	p.caughtUp(t)
	p.relay.Stall()
	ctx := context.Background()
	var logs bytes.Buffer
	eng, err = newEngine(t, s, idem.Config{AllowAsyncReplication: true, Observer: &ev, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h := func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		return []byte("charged"), nil
	}
	done := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := eng.DoBytes(rctx, request("lost"), h)
		done <- err
	}()
	<-started
	p.failover(t)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the request whose outcome was written back: %v", err)
	}
	// The engine reported what happened: an EventLostClaim carrying a
	// LostClaimError, and a log line that does not say "fenced".
	ev.mu.Lock()
	lostErr := ev.lostErr
	ev.mu.Unlock()
	var lerr *idem.LostClaimError
	if !errors.Is(lostErr, idem.ErrStoreLostClaim) || !errors.As(lostErr, &lerr) || errors.Is(lostErr, idem.ErrFenced) {
		t.Fatalf("the outcome written after the failover reported %v, want ErrStoreLostClaim (not ErrFenced)", lostErr)
	}
	t.Logf("reported: %v", lostErr)
	if !lerr.WrittenBack || lerr.Found != nil {
		t.Errorf("written back %v, found %+v; want the outcome written back over an absent record", lerr.WrittenBack, lerr.Found)
	}
	if log := logs.String(); !strings.Contains(log, "THE STORE LOST A CLAIM") || strings.Contains(strings.ToLower(log), "fenced") {
		t.Errorf("the engine's log does not say the store lost the claim, or says fenced:\n%s", log)
	}
	res, err := eng.DoBytes(ctx, request("lost"), h)
	if err != nil || !res.Replayed || string(res.Value) != "charged" || runs.Load() != 1 {
		t.Errorf("the retry after the write-back: %+v, %v, %d runs; want the outcome replayed", res, err, runs.Load())
	}
}
