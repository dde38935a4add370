package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

// Retention counts from the moment the outcome is recorded, not from the
// claim: an effect that takes 50 minutes under a 1h TTL still replays 30
// minutes after it finished (80 minutes after the claim).
func TestRetentionCountsFromTheOutcome(t *testing.T) {
	t.Parallel()
	for name, cache := range map[string]idem.ReplayCacheConfig{"cache": {}, "no-cache": {MaxBytes: -1}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock()
			e, err := idem.New(memstore.New(), idem.Config{TTL: time.Hour, Clock: clock.Now, ReplayCache: cache, Lease: 2 * time.Hour, EffectTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			runs := 0
			slow := func(context.Context, *idem.Attempt) ([]byte, error) {
				runs++
				clock.Advance(50 * time.Minute) // the effect took 50 minutes
				return []byte("charged"), nil
			}
			req := idem.Request{Key: "slow-charge", Fingerprint: idem.NewFingerprint([]byte("100 EUR"))}
			ctx := context.Background()
			if _, err := e.DoBytes(ctx, req, slow); err != nil {
				t.Fatal(err)
			}
			clock.Advance(30 * time.Minute)
			res, err := e.DoBytes(ctx, req, slow)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Replayed || runs != 1 || string(res.Value) != "charged" {
				t.Fatalf("30 minutes after the outcome (80 after the claim, TTL 1h): replayed %v, runs %d, value %q; want a replay and one run",
					res.Replayed, runs, res.Value)
			}
			if want := res.Record.CompletedAt.Add(time.Hour); !res.Record.ExpiresAt.Equal(want) {
				t.Fatalf("record expires at %v, want CompletedAt + TTL = %v", res.Record.ExpiresAt, want)
			}
		})
	}
}
