package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// pipeCounter is a go-redis hook that counts the claims (SET) and finishes
// (EVALSHA) that travel in pipelines, and the largest such pipeline.
type pipeCounter struct {
	cmds, batches, largest atomic.Int64
}

func (h *pipeCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, c := range cmds {
			if name := strings.ToLower(c.Name()); name == "set" || name == "evalsha" {
				n++
			}
		}
		if n > 0 {
			h.cmds.Add(n)
			h.batches.Add(1)
			for {
				l := h.largest.Load()
				if n <= l || h.largest.CompareAndSwap(l, n) {
					break
				}
			}
		}
		return next(ctx, cmds)
	}
}

// countedClient is a client of its own (an AutoPipeliner is shared by all
// of a client's users), its options changed by edit, with a pipeCounter.
func countedClient(t *testing.T, edit func(*redis.Options)) (*redis.Client, *pipeCounter) {
	t.Helper()
	c := standaloneClientWith(t, edit)
	h := &pipeCounter{}
	c.AddHook(h)
	return c, h
}

// firstTime claims and finishes a new key, as a first-time request does.
func firstTime(ctx context.Context, s *Store, key string) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	res, err := s.Claim(ctx, pipeClaim(key, now))
	if err != nil {
		return err
	}
	if !res.Claimed {
		return fmt.Errorf("key %s: not claimed", key)
	}
	_, err = s.Finish(ctx, pipeFinish(key, res.Record.Fence, now))
	return err
}

// pipeClaim is the claim of key's first-time request at now: attempt
// "a-"+key, what checkCrowd expects to find.
func pipeClaim(key string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{Scope: "pipe", Key: key, AttemptID: "a-" + key, Now: now, LeaseUntil: now.Add(time.Minute)}
}

// pipeFinish is the outcome of key's first-time request under fence:
// succeeded with result "ok-"+key.
func pipeFinish(key string, fence int64, now time.Time) idem.FinishParams {
	return idem.FinishParams{Scope: "pipe", Key: key, Fence: fence, AttemptID: "a-" + key,
		State: idem.StateSucceeded, Result: []byte("ok-" + key), CompletedAt: now, ExpiresAt: now.Add(time.Hour)}
}

// crowd runs callers goroutines, each making each first-time requests on
// keys of its own (named after name), and checks every record is the
// succeeded outcome its request wrote.
func crowd(t *testing.T, s *Store, name string, callers, each int) {
	t.Helper()
	runCrowd(t, s, name, callers, each, firstTime)
	checkCrowd(t, s, name, callers, each)
}

// runCrowd runs callers goroutines, each calling request for each key of
// its own (named after name), and fails t with the first error.
func runCrowd(t *testing.T, s *Store, name string, callers, each int, request func(context.Context, *Store, string) error) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := request(ctx, s, fmt.Sprintf("%s-%d-%d", name, g, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkCrowd checks that every key runCrowd named holds the succeeded
// outcome of its own request (attempt "a-"+key, result "ok-"+key).
func checkCrowd(t *testing.T, s *Store, name string, callers, each int) {
	t.Helper()
	for g := range callers {
		for i := range each {
			k := fmt.Sprintf("%s-%d-%d", name, g, i)
			r, err := s.Get(context.Background(), "pipe", k)
			if err != nil || r.State != idem.StateSucceeded || string(r.Result) != "ok-"+k || r.AttemptID != "a-"+k {
				t.Fatalf("record %s: %+v, %v", k, r, err)
			}
		}
	}
}

// TestConcurrentCommandsSharePipelines: with the zero Config, concurrent
// callers' claims and finishes travel together in pipelines (what makes a
// first-time request at 64 callers 1.5–1.7× idemlease's instead of
// 0.9–1.1×: docs/performance.md), and every request still gets its own
// answer; with Unpipelined none does.
func TestConcurrentCommandsSharePipelines(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{{"default", Config{}, true}, {"unpipelined", Config{Unpipelined: true}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c, h := countedClient(t, nil)
			s := newStoreOn(t, c, tc.cfg)
			crowd(t, s, "c", 32, 40)
			const total = 32 * 40 * 2
			t.Logf("%d of %d claims and finishes pipelined, in %d pipelines, the largest %d", h.cmds.Load(), total, h.batches.Load(), h.largest.Load())
			if !tc.want {
				if h.cmds.Load() != 0 {
					t.Fatalf("%d commands pipelined with Unpipelined", h.cmds.Load())
				}
				return
			}
			// Half of the commands is far below what 32 callers make
			// (nearly all but the one going alone), far above chance.
			if h.cmds.Load() < total/2 || h.largest.Load() < 2 {
				t.Fatalf("%d of %d commands pipelined, largest pipeline %d: concurrent callers do not share pipelines", h.cmds.Load(), total, h.largest.Load())
			}
		})
	}
}

// TestLoneCallerGoesAlone: one caller at a time never waits on the
// pipeliner: each of its commands goes alone, as without pipelining.
func TestLoneCallerGoesAlone(t *testing.T) {
	c, h := countedClient(t, nil)
	s := newStoreOn(t, c, Config{})
	crowd(t, s, "lone", 1, 50)
	// The pipeliner sends a batch of one as a command, which the pipeline
	// hook does not see, on a connection of the client's pipeline pool.
	if st := c.PoolStats().PipelineStats; h.cmds.Load() != 0 || (st != nil && st.Hits+st.Misses != 0) {
		t.Fatalf("a lone caller's commands went through the pipeliner: %d pipelined, pipeline pool %+v", h.cmds.Load(), st)
	}
}

// TestPipelinedCallerStopsWaitingAtItsDeadline: with the link to Redis
// stalled (a relay the test controls), callers whose commands wait in the
// pipeliner return at their context's deadline, not at the client's read
// timeout; once the link resumes the store works on.
func TestPipelinedCallerStopsWaitingAtItsDeadline(t *testing.T) {
	var relay *testenv.Relay
	c, h := countedClient(t, func(o *redis.Options) {
		relay = testenv.StartRelay(t, o.Addr)
		o.Addr, o.ReadTimeout = relay.Addr(), 20*time.Second
	})
	s := newStoreOn(t, c, Config{})
	crowd(t, s, "before", 4, 5) // connections dialled through the relay
	relay.Stall()
	const callers = 8
	type result struct {
		err     error
		elapsed time.Duration
	}
	results := make(chan result, callers)
	for g := range callers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := firstTime(ctx, s, fmt.Sprintf("stalled-%d", g))
			results <- result{err, time.Since(start)}
		}()
	}
	// Every caller but the one going alone (whose command waits on the
	// socket, under the client's 20 s read timeout) must be back well
	// before that.
	var back int
	deadline := time.After(5 * time.Second)
	for back < callers-1 {
		select {
		case r := <-results:
			back++
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("a caller on a stalled link got %v after %s; want its context's deadline", r.err, r.elapsed)
			}
		case <-deadline:
			t.Fatalf("%d of %d callers back 5 s after their 300 ms deadlines (pipelined so far: %d commands)", back, callers, h.cmds.Load())
		}
	}
	relay.Resume()
	crowd(t, s, "after", 8, 5)
}

// TestPipelinerClosedByAnotherUser: the AutoPipeliner is the client's,
// shared with its other users; closed by one of them, the store's
// commands go alone.
func TestPipelinerClosedByAnotherUser(t *testing.T) {
	c, _ := countedClient(t, nil)
	s := newStoreOn(t, c, Config{})
	ap, err := c.AsyncAutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	if ap != s.ap {
		t.Fatal("the store does not use the client's AutoPipeliner")
	}
	if err := ap.Close(); err != nil {
		t.Fatal(err)
	}
	crowd(t, s, "c", 16, 10)
}

// TestPipelinedCommandsSurviveCutConnections cuts every connection of the
// client every few milliseconds (and every few requests recorded) while
// 16 callers make first-time requests whose claims and finishes share
// pipelines. A cut can take a pipeline's answers after Redis ran its
// commands, and the pipeline is then sent again — by go-redis (its
// retries, the default) or by the caller that got the error (retries
// off, the caller retrying its request with the same attempt) — so a
// claim may meet its own record and a finish its own outcome. Either way a caller must find its own claim (claimed again) or
// its own outcome — never another attempt's record, never a fenced finish
// — and every record ends succeeded with its request's result.
func TestPipelinedCommandsSurviveCutConnections(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxRetries int
	}{{"go-redis-retries", 0}, {"caller-retries", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			var relay *testenv.Relay
			c, h := countedClient(t, func(o *redis.Options) {
				relay = testenv.StartRelay(t, o.Addr)
				o.Addr, o.MaxRetries = relay.Addr(), tc.maxRetries
			})
			s := newStoreOn(t, c, Config{})
			stop := make(chan struct{})
			cutterDone := make(chan struct{})
			var cuts int
			var recorded atomic.Int64 // requests settled
			go func() {
				defer close(cutterDone)
				var last int64
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					// A cut waits for a few requests recorded since the
					// last one: on a loaded machine, where a request can
					// outlast 5 ms, cuts every 5 ms alone cut each
					// request a dozen times over (48 s for this test).
					if n := recorded.Load(); n >= last+4 {
						relay.Cut()
						cuts++
						last = n
					}
				}
			}()
			stopCutter := sync.OnceFunc(func() { close(stop); <-cutterDone })
			defer stopCutter() // also when runCrowd fails the test
			const callers, each = 16, 40
			var failed atomic.Int64 // requests that got an error and were retried
			runCrowd(t, s, "cut", callers, each, func(ctx context.Context, s *Store, key string) error {
				err := settle(ctx, s, key, &failed)
				if err == nil {
					recorded.Add(1)
				}
				return err
			})
			stopCutter()
			checkCrowd(t, s, "cut", callers, each)
			t.Logf("%d cuts, %d connections dialled, %d requests retried by their callers, %d commands pipelined",
				cuts, relay.Accepted(), failed.Load(), h.cmds.Load())
			switch {
			case h.cmds.Load() == 0:
				t.Fatal("nothing was pipelined: the test showed nothing")
			case relay.Accepted() < 2*callers:
				t.Fatalf("%d connections dialled: the cuts hit too few live connections to show anything", relay.Accepted())
			case tc.maxRetries < 0 && failed.Load() == 0:
				t.Fatal("with go-redis's retries off, no caller saw a cut: the test showed nothing")
			}
		})
	}
}

// settle makes key's first-time request (attempt "a-"+key), retrying it
// with the same attempt after an error, as a client that lost its answer
// does, until it is recorded. It gives up after a minute of errors, not
// after a number of tries: on a loaded machine a request can take longer
// than the cuts' interval many times in a row.
func settle(ctx context.Context, s *Store, key string, failed *atomic.Int64) error {
	giveUp := time.Now().Add(time.Minute)
	for try := 0; try == 0 || time.Now().Before(giveUp); try++ {
		if try > 0 {
			failed.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		p := pipeClaim(key, now)
		res, err := s.Claim(ctx, p)
		if err != nil {
			continue
		}
		if !res.Claimed {
			r := res.Record
			if r.AttemptID == p.AttemptID && r.State == idem.StateSucceeded && string(r.Result) == "ok-"+key {
				return nil // recorded before a cut took the answer
			}
			return fmt.Errorf("key %s, a retry of attempt %s: found %+v", key, p.AttemptID, r)
		}
		_, err = s.Finish(ctx, pipeFinish(key, res.Record.Fence, now))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, idem.ErrFenced):
			return fmt.Errorf("key %s: its own finish fenced: %v", key, err)
		}
	}
	return fmt.Errorf("key %s: not recorded after a minute of retries", key)
}
