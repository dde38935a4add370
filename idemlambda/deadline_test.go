package idemlambda

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestBoundCutsTheEffectToTheRemainingTime: the effect's bound is the
// invocation's remaining time less the margin, or the policy's (or the
// engine's) timeout when shorter.
func TestBoundCutsTheEffectToTheRemainingTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
	defer cancel()
	for _, c := range []struct {
		pol, def, want time.Duration
	}{
		{0, 30 * time.Second, 9 * time.Second},
		{0, 4 * time.Second, 4 * time.Second},
		{5 * time.Second, 30 * time.Second, 5 * time.Second},
		{20 * time.Second, 30 * time.Second, 9 * time.Second},
	} {
		got, err := bound(ctx, idem.Policy{Timeout: c.pol}, c.def, time.Second, now)
		if err != nil || got.Timeout != c.want {
			t.Errorf("bound(policy %s, engine %s) = %s, %v; want %s", c.pol, c.def, got.Timeout, err, c.want)
		}
	}
	if _, err := bound(ctx, idem.Policy{}, time.Minute, time.Second, now.Add(9500*time.Millisecond)); !errors.Is(err, ErrNoTimeLeft) {
		t.Errorf("half a second left, margin 1s: %v, want ErrNoTimeLeft", err)
	}
	got, err := bound(context.Background(), idem.Policy{Timeout: 3 * time.Second}, time.Minute, time.Second, now)
	if err != nil || got.Timeout != 3*time.Second {
		t.Errorf("no deadline: %s, %v; want the policy unchanged", got.Timeout, err)
	}
}
