package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/memstore"
)

func TestHistQuantiles(t *testing.T) {
	t.Parallel()
	var h hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*histGrowth*1.001 {
			t.Errorf("quantile(%v) = %s, want %s within one bucket", c.q, got, c.want)
		}
	}
	var m hist
	m.merge(&h)
	m.merge(&h)
	if m.n != 200 || m.quantile(0.5) != h.quantile(0.5) {
		t.Fatalf("merged: n=%d p50=%s", m.n, m.quantile(0.5))
	}
	if (&hist{}).quantile(0.5) != 0 {
		t.Fatal("empty histogram has a quantile")
	}
}

func TestParsers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"200": 200, "200B": 200, "4KiB": 4096, "4KB": 4000, "1MiB": 1 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0B", "-1", "x", "17MiB", "2GB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if c, err := ParseConcurrency("1, 16,64"); err != nil || len(c) != 3 || c[2] != 64 {
		t.Fatalf("ParseConcurrency = %v, %v", c, err)
	}
	for _, bad := range []string{"", "0", "1,x", "5000"} {
		if _, err := ParseConcurrency(bad); err == nil {
			t.Errorf("ParseConcurrency(%q) accepted", bad)
		}
	}
	if s, err := ParseScenarios("all"); err != nil || len(s) != len(allScenarios) {
		t.Fatalf("ParseScenarios(all) = %v, %v", s, err)
	}
	if _, err := ParseScenarios("first,bogus"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
	if p, err := ParsePrefill("10k, 1M,10M"); err != nil || len(p) != 3 || p[0] != 10_000 || p[1] != 1_000_000 || p[2] != 10_000_000 {
		t.Fatalf("ParsePrefill = %v, %v", p, err)
	}
	for _, bad := range []string{"", "0", "1M,10k", "10k,10k", "x", "-5"} {
		if _, err := ParsePrefill(bad); err == nil {
			t.Errorf("ParsePrefill(%q) accepted", bad)
		}
	}
	for n, want := range map[int64]string{999: "999", 10_000: "10k", 2_500_000: "2.5M", 10_000_000: "10M"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDSNRewriting(t *testing.T) {
	t.Parallel()
	if got := withQuery("mysql://root@h:3306/test?table=mine&timeout=5s", "table", "scratch"); !strings.Contains(got, "table=scratch") || strings.Contains(got, "mine") || !strings.Contains(got, "timeout=5s") {
		t.Errorf("withQuery = %q", got)
	}
	if got := storeOptions("postgres://u:pw@h/db?batch=2ms&password=secret&sslmode=disable"); got != "batch=2ms sslmode=disable" {
		t.Errorf("storeOptions = %q", got)
	}
	if got := pgDriverDSN("postgres://u@h/db?schema=s&batch=2ms&batch_size=64&batch_finish=true&sslmode=disable&notify=false"); got != "postgres://u@h/db?sslmode=disable" {
		t.Errorf("pgDriverDSN = %q", got)
	}
	if got := pgDriverDSN("postgres://u@h/db?async_outcomes=true&call_timeout=5s&sslmode=disable"); got != "postgres://u@h/db?sslmode=disable" {
		t.Errorf("pgDriverDSN = %q", got)
	}
	if got := pgDriverDSN("postgres://u@a:1,b:2/db?replicated_claims=on&replicated_claims_timeout=1s&target_session_attrs=read-write"); got != "postgres://u@a:1,b:2/db?target_session_attrs=read-write" {
		t.Errorf("pgDriverDSN = %q", got)
	}
	for dsn, want := range map[string]string{"postgres://h/db": "", "postgres://h/db?replicated_claims=off": "",
		"postgres://h/db?replicated_claims=ON": "on", "postgres://h/db?replicated_claims=remote_apply": "remote_apply"} {
		if got := pgReplicatedLevel(dsn); got != want {
			t.Errorf("pgReplicatedLevel(%q) = %q, want %q", dsn, got, want)
		}
	}
	if got := natsDSN("nats://u:p@a:1,b:2/mine?replicas=1", "scratch"); got != "nats://u:p@a:1,b:2/scratch?replicas=1" {
		t.Errorf("natsDSN = %q", got)
	}
	if got := natsDSN("nats://h", "scratch"); got != "nats://h/scratch" {
		t.Errorf("natsDSN without a bucket = %q", got)
	}
	got, err := mysqlDriverDSN("mysql://root:p%40ss@h/test?table=t")
	if err != nil || got != "root:p@ss@tcp(h:3306)/test?interpolateParams=true" {
		t.Errorf("mysqlDriverDSN = %q, %v", got, err)
	}
}

// TestWaitersCoalesce parks many waiters on one key and checks that they
// share one watch: the reads while the key is held do not grow with the
// number of waiters, and every waiter replays the one outcome.
func TestWaitersCoalesce(t *testing.T) {
	t.Parallel()
	const n = 300
	for _, mode := range []string{WaitersGoroutines, WaitersAsync} {
		r, err := runWaiters(context.Background(), memstore.New(), mode, n, 100*time.Millisecond, []byte("v"))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r.Replayed != n {
			t.Fatalf("%s: replayed %d, want %d", mode, r.Replayed, n)
		}
		// The key is held by the same engine: a duplicate joins the flight
		// without a store claim of its own.
		if r.JoinClaims != 0 {
			t.Fatalf("%s: waiters made %d store claims before parking, want 0", mode, r.JoinClaims)
		}
		// One shared watch reads a handful of times; per-waiter polling
		// would read at least once per waiter.
		if r.WatchReads >= n/10 {
			t.Fatalf("%s: %d store reads while %d waiters were parked: waits are not shared", mode, r.WatchReads, n)
		}
		switch mode {
		case WaitersGoroutines:
			if r.Goroutines < n {
				t.Fatalf("goroutines while parked = %d, want at least %d", r.Goroutines, n)
			}
		case WaitersAsync:
			if r.Goroutines >= n/10 {
				t.Fatalf("async: %d goroutines while %d waiters were parked: waiters hold goroutines", r.Goroutines, n)
			}
		}
	}
}

func TestRunMemoryAndSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, dsn := range []string{"memory://", "sqlite://" + filepath.Join(dir, "b.db")} {
		rep, err := Run(context.Background(), Options{Store: dsn, Concurrency: []int{2}, Duration: 50 * time.Millisecond,
			Scenarios: []string{ScenarioFirst, ScenarioReplay, ScenarioStorm, ScenarioMixed}})
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if len(rep.Cells) != 11 {
			t.Fatalf("%s: %d cells, want 11", dsn, len(rep.Cells))
		}
		for _, c := range rep.Cells {
			if c.Ops == 0 || (c.Side != sideRaw && c.Ratio == 0) {
				t.Errorf("%s: empty cell %+v", dsn, c)
			}
			if c.Scenario == ScenarioReplay && c.Side != sideRaw && c.First != 0 {
				t.Errorf("%s: a replay cell ran the effect %d times", dsn, c.First)
			}
		}
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("scratch files left behind: %v", left)
	}
}
