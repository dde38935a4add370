package idemhttp_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// quotaEvents counts EventScopeQuota by quota.
type quotaEvents struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *quotaEvents) Observe(_ context.Context, ev idem.Event) {
	if ev.Kind == idem.EventScopeQuota {
		q.mu.Lock()
		q.n[ev.Quota]++
		q.mu.Unlock()
	}
}

func (q *quotaEvents) count(name string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[name]
}

// byHeader scopes by the X-User header.
func byHeader(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }

// TestScopeQuotaRate: a scope may start Rate new keys, then gets 429
// scope-quota with Retry-After while its handler does not run and nothing
// is recorded (the key runs once the quota allows); replays are never
// refused; another scope has its own budget.
func TestScopeQuotaRate(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		obs := &quotaEvents{n: map[string]int{}}
		e := newEnv(t, open, idem.Config{Observer: obs},
			idemhttp.Config{Scope: byHeader, ScopeQuota: idemhttp.ScopeQuota{Rate: 2, Per: time.Hour}},
			func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
		for _, k := range []string{"k1", "k2"} {
			wantStatus(t, e.do("POST", "/pay", k, `{}`, "X-User", "alice"), http.StatusCreated)
		}
		r := e.do("POST", "/pay", "k3", `{}`, "X-User", "alice")
		p := wantProblem(t, r, http.StatusTooManyRequests, idemhttp.TypeScopeQuota)
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || p.RetryAfter != ra {
			t.Fatalf("Retry-After %q, problem retry_after %d", r.header.Get("Retry-After"), p.RetryAfter)
		}
		if n := e.calls.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2 (the refused request must not run)", n)
		}
		if _, err := e.store.Get(context.Background(), "alice", "k3"); err == nil {
			t.Fatal("a refused request left a record")
		}
		// Replays are not new keys: never refused.
		for i := 0; i < 3; i++ {
			r := e.do("POST", "/pay", "k1", `{}`, "X-User", "alice")
			if r.status != http.StatusCreated || r.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Fatalf("replay under a spent quota = %d %s", r.status, r.body)
			}
		}
		// Another scope has its own budget.
		wantStatus(t, e.do("POST", "/pay", "k3", `{}`, "X-User", "bob"), http.StatusCreated)
		if obs.count(idemhttp.QuotaRate) != 1 {
			t.Fatalf("rate quota events = %d, want 1", obs.count(idemhttp.QuotaRate))
		}
	})
}

// TestScopeQuotaInFlight: with InFlight 1, a second new key of a scope
// whose first request is still running gets 429 scope-quota (not run,
// not recorded); other scopes and, once the first ended, the same scope
// run.
func TestScopeQuotaInFlight(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		obs := &quotaEvents{n: map[string]int{}}
		started, release := make(chan struct{}, 1), make(chan struct{})
		e := newEnv(t, open, idem.Config{Observer: obs},
			idemhttp.Config{Scope: byHeader, ScopeQuota: idemhttp.ScopeQuota{InFlight: 1}},
			func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					started <- struct{}{}
					<-release
				}
				w.WriteHeader(http.StatusCreated)
			})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock) // before the server closes, should the test fail early
		done := make(chan reply, 1)
		go func() { done <- e.do("POST", "/slow", "k1", `{}`, "X-User", "alice") }()
		<-started
		r := e.do("POST", "/pay", "k2", `{}`, "X-User", "alice")
		wantProblem(t, r, http.StatusTooManyRequests, idemhttp.TypeScopeQuota)
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		if _, err := e.store.Get(context.Background(), "alice", "k2"); err == nil {
			t.Fatal("a refused request left a record")
		}
		wantStatus(t, e.do("POST", "/pay", "k2", `{}`, "X-User", "bob"), http.StatusCreated)
		unblock()
		wantStatus(t, <-done, http.StatusCreated)
		wantStatus(t, e.do("POST", "/pay", "k2", `{}`, "X-User", "alice"), http.StatusCreated)
		if n := e.calls.Load(); n != 3 {
			t.Fatalf("handler ran %d times, want 3", n)
		}
		if obs.count(idemhttp.QuotaInFlight) != 1 {
			t.Fatalf("in-flight quota events = %d, want 1", obs.count(idemhttp.QuotaInFlight))
		}
	})
}

func TestScopeQuotaConfigValidated(t *testing.T) {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, q := range []idemhttp.ScopeQuota{{InFlight: -1}, {Rate: -1}, {Rate: 1, Per: -time.Second}} {
		if _, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, ScopeQuota: q}); err == nil {
			t.Errorf("ScopeQuota %+v accepted", q)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]struct {
		n   int
		per time.Duration
	}{"100/min": {100, time.Minute}, "5/s": {5, time.Second}, "3/h": {3, time.Hour}} {
		n, per, err := idemhttp.ParseRate(in)
		if err != nil || n != want.n || per != want.per {
			t.Errorf("ParseRate(%q) = %d, %s, %v", in, n, per, err)
		}
	}
	for _, in := range []string{"", "100", "0/min", "-1/min", "x/min", "10/day", "10/"} {
		if _, _, err := idemhttp.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}
