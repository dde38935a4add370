package sqlitestore

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// seed claims key at created and moves it to state.
func seed(t *testing.T, s *Store, scope, key string, created time.Time, state idem.State, expires time.Time) {
	t.Helper()
	p := claimParams(key, "att-"+key)
	p.Scope, p.Now, p.LeaseUntil = scope, created, created.Add(time.Minute)
	r := mustClaim(t, s, p).Record
	if state == idem.StateInProgress {
		return
	}
	f := finishParams(r, state, "r")
	f.ExpiresAt = expires
	if state == idem.StateUnknown {
		f.ExpiresAt = time.Time{}
	}
	mustFinish(t, s, f)
}

func TestSweepOnlyExpiredTerminal(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	past, future := t0.Add(-time.Hour), t0.Add(time.Hour)
	seed(t, s, "s", "ok-expired", t0, idem.StateSucceeded, past)
	seed(t, s, "s", "failed-expired", t0, idem.StateFailed, t0) // expires exactly now
	seed(t, s, "s", "ok-live", t0, idem.StateSucceeded, future)
	seed(t, s, "s", "unknown", t0.Add(-1000*time.Hour), idem.StateUnknown, time.Time{})
	seed(t, s, "s", "stuck", t0.Add(-1000*time.Hour), idem.StateInProgress, time.Time{})

	n, err := s.Sweep(ctx, idem.SweepParams{Now: t0, Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("sweep limit 1 = %d, %v; want 1", n, err)
	}
	if n, err = s.Sweep(ctx, idem.SweepParams{Now: t0, Limit: 10}); err != nil || n != 1 {
		t.Fatalf("second sweep = %d, %v; want 1", n, err)
	}
	// Far in the future only ok-live has expired; unknown and stuck stay.
	if n, err = s.Sweep(ctx, idem.SweepParams{Now: t0.Add(100000 * time.Hour)}); err != nil || n != 1 {
		t.Fatalf("late sweep = %d, %v; want 1", n, err)
	}
	recs, err := s.List(ctx, idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(recs); len(got) != 2 || got[0] != "stuck" || got[1] != "unknown" {
		t.Fatalf("left after sweeps: %v, want [stuck unknown]", got)
	}
}

func TestListOrderFiltersAndCursor(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	// Three records share one microsecond: the cursor must order them by
	// scope then key, and never repeat or skip one.
	seed(t, s, "b", "k2", t0, idem.StateSucceeded, t0.Add(time.Hour))
	seed(t, s, "a", "k9", t0, idem.StateUnknown, time.Time{})
	seed(t, s, "b", "k1", t0, idem.StateInProgress, time.Time{})
	seed(t, s, "a", "k0", t0.Add(-time.Second), idem.StateUnknown, time.Time{})
	seed(t, s, "a", "k5", t0.Add(time.Second), idem.StateFailed, t0.Add(time.Hour))

	want := []string{"k0", "k9", "k1", "k2", "k5"}
	var got []string
	var cur *idem.Cursor
	for range 10 {
		page, err := s.List(ctx, idem.ListFilter{Limit: 2, After: cur})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, keysOf(page)...)
		last := page[len(page)-1]
		cur = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
	}
	if !equalStrings(got, want) {
		t.Fatalf("paged list = %v, want %v", got, want)
	}

	checks := []struct {
		f    idem.ListFilter
		want []string
	}{
		{idem.ListFilter{Scope: "a"}, []string{"k0", "k9", "k5"}},
		{idem.ListFilter{States: []idem.State{idem.StateUnknown}}, []string{"k0", "k9"}},
		{idem.ListFilter{States: []idem.State{idem.StateSucceeded, idem.StateFailed}}, []string{"k2", "k5"}},
		{idem.ListFilter{CreatedBefore: t0}, []string{"k0"}},
		{idem.ListFilter{Scope: "a", States: []idem.State{idem.StateUnknown}, Limit: 1}, []string{"k0"}},
	}
	for _, c := range checks {
		recs, err := s.List(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(recs); !equalStrings(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

func keysOf(recs []idem.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
