package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestGetAbsent(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Get(context.Background(), "tenant-1", "nope"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// seedList claims keys k0..k5 a second apart and finishes the even ones.
func seedList(t *testing.T, f *fixture) {
	ctx := context.Background()
	for i := range 6 {
		p := claimParams(fmt.Sprintf("k%d", i), "a", t0.Add(time.Duration(i)*time.Second))
		if i == 5 {
			p.Scope = "tenant-2"
		}
		mustClaim(t, f.st, p)
		if i%2 == 0 {
			if _, err := f.st.Finish(ctx, succeed(p.Key, "a", 1, "ok", p.Now)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func keys(rs []idem.Record) string {
	var s string
	for _, r := range rs {
		s += r.Key + " "
	}
	return s
}

func TestListFilters(t *testing.T) {
	f := newFixture(t)
	seedList(t, f)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		f    idem.ListFilter
		want string
	}{
		"all":            {idem.ListFilter{}, "k0 k1 k2 k3 k4 k5 "},
		"scope":          {idem.ListFilter{Scope: "tenant-2"}, "k5 "},
		"in_progress":    {idem.ListFilter{States: []idem.State{idem.StateInProgress}}, "k1 k3 k5 "},
		"two states":     {idem.ListFilter{States: []idem.State{idem.StateInProgress, idem.StateSucceeded}, Scope: "tenant-1"}, "k0 k1 k2 k3 k4 "},
		"created before": {idem.ListFilter{CreatedBefore: t0.Add(2 * time.Second)}, "k0 k1 "},
		"limit":          {idem.ListFilter{Limit: 2}, "k0 k1 "},
		"after":          {idem.ListFilter{After: &idem.Cursor{CreatedAt: t0.Add(3 * time.Second), Scope: "tenant-1", Key: "k3"}}, "k4 k5 "},
	} {
		rs, err := f.st.List(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := keys(rs); got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

func TestListPagesWithTiesInCreatedAt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Same CreatedAt everywhere: the cursor must order by scope, then key.
	for _, sk := range [][2]string{{"b", "k1"}, {"a", "k2"}, {"a", "k1"}, {"b", "k0"}} {
		p := claimParams(sk[1], "a", t0)
		p.Scope = sk[0]
		mustClaim(t, f.st, p)
	}
	var seen []string
	var after *idem.Cursor
	for range 10 {
		rs, err := f.st.List(ctx, idem.ListFilter{Limit: 1, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			break
		}
		r := rs[0]
		seen = append(seen, r.Scope+"/"+r.Key)
		after = &idem.Cursor{CreatedAt: r.CreatedAt, Scope: r.Scope, Key: r.Key}
	}
	if got := fmt.Sprint(seen); got != "[a/k1 a/k2 b/k0 b/k1]" {
		t.Fatalf("pages = %s", got)
	}
}

func TestSweepDeletesOnlyExpiredTerminal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(key string, state idem.State, expires time.Time) {
		mustClaim(t, f.st, claimParams(key, "a", t0))
		if state == idem.StateInProgress {
			return
		}
		p := idem.FinishParams{Scope: "tenant-1", Key: key, Fence: 1, AttemptID: "a", State: state, CompletedAt: t0, ExpiresAt: expires}
		if state == idem.StateUnknown {
			p.ExpiresAt = time.Time{}
		}
		if _, err := f.st.Finish(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Hour)
	mk("s-old1", idem.StateSucceeded, now.Add(-time.Minute))
	mk("s-old2", idem.StateSucceeded, now) // expires exactly now: expired
	mk("f-old", idem.StateFailed, now.Add(-time.Second))
	mk("s-new", idem.StateSucceeded, now.Add(time.Second))
	mk("unknown", idem.StateUnknown, time.Time{})
	mk("inprog", idem.StateInProgress, time.Time{})

	n, err := f.st.Sweep(ctx, idem.SweepParams{Now: now, Limit: 2})
	if err != nil || n != 2 {
		t.Fatalf("first batch = %d, %v; want 2", n, err)
	}
	n, err = f.st.Sweep(ctx, idem.SweepParams{Now: now, Limit: 2})
	if err != nil || n != 1 {
		t.Fatalf("second batch = %d, %v; want 1", n, err)
	}
	if n, _ = f.st.Sweep(ctx, idem.SweepParams{Now: now.Add(1000 * time.Hour)}); n != 1 {
		t.Fatalf("unlimited sweep far in the future deleted %d, want 1 (s-new only)", n)
	}
	rs, _ := f.st.List(ctx, idem.ListFilter{})
	if got := keys(rs); got != "unknown inprog " && got != "inprog unknown " {
		t.Fatalf("left after sweeps: %q", got)
	}
}
