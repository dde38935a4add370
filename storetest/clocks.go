package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Clock skews for runClocks: one engine's clock runs ahead by more than the
// lease, the other's behind by more than the TTL.
const (
	skewAhead  = 2 * time.Minute
	skewBehind = -25 * time.Hour
)

// runClocks runs two engines on one store whose clocks disagree, one
// skewAhead and one skewBehind, with a 30s lease and a 24h TTL. Deciding
// on their own clocks, the one ahead would find the other's live records
// past their lease (a false unknown) and its finished records past their
// TTL (a re-run). On a store with a clock ([idem.StoreClock]) both decide
// on the store's time and agree. Stores without one skip: the local ones
// (memory, SQLite) share one host's clock, and the remote ones with no
// clock a client can read (DynamoDB, NATS key-value) decide on the
// callers' clocks, which their docs say must be synchronised.
func runClocks(t *testing.T, h Harness) {
	Deadline(t, h.deadline())
	st := h.open(t)
	if _, ok := st.(idem.StoreClock); !ok {
		t.Skip("store has no clock idem can read: leases and expiry follow the callers' clocks")
	}
	SkewedClocks(t, st)
}

// SkewedClocks is the skewed-clocks test on st, a store with a clock.
func SkewedClocks(t *testing.T, st idem.Store) {
	ctx := ctxT(t)
	engine := func(skew time.Duration) *idem.Engine {
		e, err := idem.New(st, idem.Config{
			Lease: 30 * time.Second, TTL: 24 * time.Hour, AllowVolatileStore: true,
			Clock:       func() time.Time { return time.Now().Add(skew) },
			ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		if off := e.ClockOffset(); (off + skew).Abs() > 10*time.Second {
			t.Errorf("engine %s off: measured offset %s to the store, want about %s", skew, off, -skew)
		}
		return e
	}
	ahead, behind := engine(skewAhead), engine(skewBehind)
	var runs atomic.Int64
	effect := func(context.Context, *idem.Attempt) ([]byte, error) { runs.Add(1); return []byte("done"), nil }
	scope := "clocks-" + time.Now().Format("150405.000000")

	// A live record held by one engine is in flight, never unknown, for
	// the other, in both directions.
	for _, p := range []struct {
		name          string
		holder, other *idem.Engine
	}{{"behind holds", behind, ahead}, {"ahead holds", ahead, behind}} {
		//idem:ignore sharednamespace a conformance fixture's key, never stored beyond the test
		r := idem.Request{Scope: scope, Key: idem.Key("live-" + p.name[:5]), Fingerprint: fp("live")}
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := p.holder.DoBytes(ctx, r, func(context.Context, *idem.Attempt) ([]byte, error) {
				close(started)
				<-release
				return []byte("held"), nil
			})
			done <- err
		}()
		<-started
		_, err := p.other.DoBytes(ctx, r, effect)
		close(release)
		if herr := <-done; herr != nil {
			t.Fatalf("%s: holder: %v", p.name, herr)
		}
		if !errors.Is(err, idem.ErrInFlight) {
			t.Errorf("%s: the other engine got %v, want ErrInFlight (a live record taken for unknown)", p.name, err)
		}
	}

	// A record finished by one engine replays on the other, in both
	// directions: never expired early, never run again.
	for _, p := range []struct {
		name        string
		first, next *idem.Engine
	}{{"behind records", behind, ahead}, {"ahead records", ahead, behind}} {
		//idem:ignore sharednamespace a conformance fixture's key, never stored beyond the test
		r := idem.Request{Scope: scope, Key: idem.Key("done-" + p.name[:5]), Fingerprint: fp("done")}
		before := runs.Load()
		if _, err := p.first.DoBytes(ctx, r, effect); err != nil {
			t.Fatalf("%s: first: %v", p.name, err)
		}
		res, err := p.next.DoBytes(ctx, r, effect)
		if err != nil {
			t.Fatalf("%s: next: %v", p.name, err)
		}
		if n := runs.Load() - before; n != 1 || !res.Replayed {
			t.Errorf("%s: the effect ran %d times (replayed %v), want once and a replay", p.name, n, res.Replayed)
		}
	}
}
