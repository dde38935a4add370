package idem_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// The engine's own allocations on its two hot paths, over the memory store.
// The ceilings are what the code needs today; each optimisation they guard
// (one allocation for an attempt's run state, no timer or context per
// attempt, the intent encoded without reflection, a replay-cache entry as
// one object, a cached replay with no allocation) pushes a count above its
// ceiling when it is undone.
func TestEngineAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ctx := context.Background()
	e := newEngine(t, memstore.New(), idem.Config{})
	fp := idem.NewFingerprint([]byte("body"))
	in := &idem.Intent{Operation: "charge", Fields: map[string]string{"body_digests": "amount=0011223344556677"}}
	val := []byte(`{"id":"ch_1"}`)
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return val, nil }

	const runs = 200
	keys := make([]idem.Key, runs+1)
	for i := range keys {
		keys[i] = idem.Key("first-" + strconv.Itoa(i))
	}
	i := 0
	first := testing.AllocsPerRun(runs, func() {
		if _, err := e.DoBytes(ctx, idem.Request{Key: keys[i], Fingerprint: fp, Intent: in}, h); err != nil {
			t.Fatal(err)
		}
		i++
	})
	// The store's claim (record, intent copy) and finish (result copy,
	// returned record), the cache entry, the run state, the effect's
	// cancellable context (two) over the caller's context detached from
	// its cancellation (one: context.WithoutCancel; the effect's timeout
	// rides on the heartbeat schedule, see effectCtx), the attempt id and
	// the encoded intent.
	if first > 10 {
		t.Errorf("a first-time call allocates %.0f objects, want at most 10", first)
	}

	replay := testing.AllocsPerRun(runs, func() {
		if _, err := e.DoBytes(ctx, idem.Request{Key: keys[0], Fingerprint: fp, Intent: in}, h); err != nil {
			t.Fatal(err)
		}
	})
	if replay > 0 {
		t.Errorf("a replay from the cache allocates %.0f objects, want none", replay)
	}
	t.Logf("first %.0f, replay %.0f allocations", first, replay)
}

// BenchmarkEngineFirstTime and BenchmarkEngineReplay time the two paths
// whose allocations TestEngineAllocations bounds (memory store; run with
// -benchmem to see the counts the ceilings pin).
func BenchmarkEngineFirstTime(b *testing.B) {
	ctx := context.Background()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	fp := idem.NewFingerprint([]byte("body"))
	in := &idem.Intent{Operation: "charge"}
	val := []byte(`{"id":"ch_1"}`)
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return val, nil }
	keys := make([]idem.Key, b.N)
	for i := range keys {
		keys[i] = idem.Key("first-" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := e.DoBytes(ctx, idem.Request{Key: keys[i], Fingerprint: fp, Intent: in}, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEngineReplay(b *testing.B) {
	ctx := context.Background()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	req := idem.Request{Key: "k", Fingerprint: idem.NewFingerprint([]byte("body"))}
	h := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("v"), nil }
	if _, err := e.DoBytes(ctx, req, h); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := e.DoBytes(ctx, req, h); err != nil {
			b.Fatal(err)
		}
	}
}
