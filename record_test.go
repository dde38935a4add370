package idem

import (
	"testing"
	"time"
)

// TestEffectiveState: an in_progress record reads as unknown from the
// moment its lease has passed, and every other state reads as stored.
func TestEffectiveState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		state State
		lease time.Time
		want  State
	}{
		{StateInProgress, now.Add(time.Second), StateInProgress},
		{StateInProgress, now, StateUnknown},
		{StateInProgress, now.Add(-time.Second), StateUnknown},
		{StateUnknown, now.Add(time.Hour), StateUnknown},
		{StateSucceeded, now.Add(-time.Hour), StateSucceeded},
		{StateFailed, now.Add(-time.Hour), StateFailed},
	} {
		r := &Record{State: c.state, LeaseUntil: c.lease}
		if got := r.EffectiveState(now); got != c.want {
			t.Errorf("%s with lease %s: EffectiveState = %s, want %s", c.state, c.lease.Sub(now), got, c.want)
		}
	}
}
