package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// failoverLoad is the history of a failover test: first-time intents,
// each sent twice at once (at-least-once delivery re-sends), through an
// engine, counting each effect; a stall of a replication link and a kill
// of the primary in the middle; then every intent retried until it has
// an answer.
type failoverLoad struct {
	t       *testing.T
	keys    int
	prefix  string
	effects []atomic.Int64

	// phase is where the history is: phaseBefore the stall, phaseStall
	// (the link stalled, the primary alive), phaseAfter the kill.
	phase atomic.Int32
	// effectsIn counts the effects run, by the phase their send started in.
	effectsIn  [3]atomic.Int64
	ranInStall []atomic.Bool // per intent: an effect ran by a send started during the stall
	lostClaims atomic.Int64  // EventLostClaim seen by the engine's observer

	wg sync.WaitGroup // the sends of the first phase
}

// newFailoverLoad returns a history of keys intents, and room to count
// the effects of extra more that the test sends itself (keys, keys+1, …).
// The phases of a failover history.
const (
	phaseBefore = iota
	phaseStall
	phaseAfter
)

func newFailoverLoad(t *testing.T, keys, extra int) *failoverLoad {
	return &failoverLoad{t: t, keys: keys, prefix: uniquePrefix(t), effects: make([]atomic.Int64, keys+extra), ranInStall: make([]atomic.Bool, keys+extra)}
}

// engine returns an engine on st for this history: a short lease, so
// that records left in_progress by the kill turn unknown within the test,
// and an outcome write retried long enough to outlast the failover.
func (l *failoverLoad) engine(st idem.Store, allowAsync bool) (*idem.Engine, error) {
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventLostClaim && errors.Is(ev.Err, idem.ErrStoreLostClaim) {
			l.lostClaims.Add(1)
		}
	})
	e, err := idem.New(st, idem.Config{
		Lease: 2 * time.Second, StoreRetries: 1, FinishTimeout: 30 * time.Second,
		AllowAsyncReplication: allowAsync, Observer: obs,
	})
	if err == nil {
		l.t.Cleanup(func() { e.Close() })
	}
	return e, err
}

func (l *failoverLoad) request(k int) idem.Request {
	return idem.Request{Scope: "failover", Key: idem.Key(fmt.Sprint("k", k)), Fingerprint: idem.NewFingerprint([]byte(fmt.Sprint("k", k)))}
}

// send sends intent k once: the effect counts itself.
func (l *failoverLoad) send(ctx context.Context, e *idem.Engine, k int) (idem.Result, error) {
	phase := l.phase.Load()
	return e.DoBytes(ctx, l.request(k), func(context.Context, *idem.Attempt) ([]byte, error) {
		l.effects[k].Add(1)
		l.effectsIn[phase].Add(1)
		if phase == phaseStall {
			l.ranInStall[k].Store(true)
		}
		return []byte("ok"), nil
	})
}

// firstPhase sends intents 0, 1, … each twice at once, from workers
// goroutines, until stop is closed; it calls midway once half of the
// intents have been sent. It returns once no new send starts; sends
// still in flight (an outcome write waiting out the failover) go on and
// are waited for by wait.
func (l *failoverLoad) firstPhase(e *idem.Engine, workers int, midway func(), stop <-chan struct{}) (sent int) {
	var next atomic.Int64
	var once sync.Once
	var started sync.WaitGroup
	for range workers {
		started.Add(1)
		go func() {
			defer started.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := int(next.Add(1) - 1)
				if k >= l.keys {
					return
				}
				if k == l.keys/2 {
					once.Do(midway)
				}
				var pair sync.WaitGroup
				for range 2 {
					pair.Add(1)
					l.wg.Add(1)
					go func() {
						defer pair.Done()
						defer l.wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
						defer cancel()
						_, _ = l.send(ctx, e, k)
					}()
				}
				// The pair of a worker overlaps the next pair only when the
				// store is slow to answer: the kill finds sends in flight.
				waitUpTo(&pair, 50*time.Millisecond)
			}
		}()
	}
	started.Wait()
	return min(int(next.Load()), l.keys)
}

// waitUpTo waits for wg, or for d.
func waitUpTo(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// retryAll sends every intent again, until each has an answer — its
// outcome (recorded or replayed) or "unknown" (a record the kill left
// in_progress, whose lease passed) — and returns how many did not get
// one before deadline, and the seconds until the first send succeeded.
func (l *failoverLoad) retryAll(e *idem.Engine, workers int, deadline time.Duration) (unanswered int, firstOK time.Duration) {
	start := time.Now()
	var firstOnce sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var next, left atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= l.keys {
					return
				}
				for {
					_, err := l.send(ctx, e, k)
					if err == nil || errors.Is(err, idem.ErrUnknownOutcome) || errors.Is(err, idem.ErrUnknown) || errors.Is(err, idem.ErrRecordedFailure) {
						firstOnce.Do(func() { firstOK = time.Since(start) })
						break
					}
					if ctx.Err() != nil {
						left.Add(1)
						l.t.Logf("key %d: no answer before the deadline: %v", k, err)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return int(left.Load()), firstOK
}

// effects returns how many effects ran in all.
func (l *failoverLoad) effectsRun() int64 {
	return l.effectsIn[phaseBefore].Load() + l.effectsIn[phaseStall].Load() + l.effectsIn[phaseAfter].Load()
}

// duplicates returns the intents whose effect ran more than once.
func (l *failoverLoad) duplicates() []int {
	var d []int
	for k := range l.effects {
		if l.effects[k].Load() > 1 {
			d = append(d, k)
		}
	}
	return d
}

// replicaOnline waits until the primary at addr counts n replicas as
// online (ROLE).
func replicaOnline(t *testing.T, addr string, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := onlineReplicas(context.Background(), c)
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d replicas online (err %v), want %d", addr, got, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
