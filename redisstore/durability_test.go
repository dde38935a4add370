package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// ownServer starts a redis-server of the test's own with args and returns
// a store on it.
func ownServer(t *testing.T, args ...string) *Store {
	t.Helper()
	opt, err := redis.ParseURL(testenv.StartRedis(t, args...))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return newStoreOn(t, c, Config{})
}

// TestNewRefusesStoresThatForget: New refuses a Redis that evicts or keeps
// nothing across a restart, naming the setting and the fix, and starts on
// one that keeps its records (AOF, noeviction).
func TestNewRefusesStoresThatForget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		setting string // "" for a healthy server
	}{
		{"evicting", []string{"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"}, "maxmemory-policy = allkeys-lru"},
		{"volatile-lru", []string{"--appendonly", "yes", "--maxmemory-policy", "volatile-lru"}, "maxmemory-policy = volatile-lru"},
		{"no persistence", []string{"--save", "", "--appendonly", "no"}, "appendonly, save"},
		{"healthy", []string{"--appendonly", "yes"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := ownServer(t, tc.args...)
			e, err := idem.New(st, idem.Config{})
			if tc.setting == "" {
				if err != nil {
					t.Fatalf("New on a durable Redis: %v", err)
				}
				e.Close()
				return
			}
			if !errors.Is(err, idem.ErrVolatileStore) {
				t.Fatalf("New = %v, want ErrVolatileStore", err)
			}
			var verr *idem.VolatileStoreError
			if !errors.As(err, &verr) || len(verr.Findings) != 1 || verr.Findings[0].Severity != idem.SeverityRefuse {
				t.Fatalf("error %#v, want one refusing finding", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.setting) || !strings.Contains(msg, "fix: CONFIG SET") {
				t.Errorf("error %q does not name %q and its fix", msg, tc.setting)
			}
		})
	}
}

// TestAllowVolatileStore: with AllowVolatileStore the engine starts and
// tells its Observer.
func TestAllowVolatileStore(t *testing.T) {
	t.Parallel()
	st := ownServer(t, "--maxmemory-policy", "allkeys-lru")
	var volatile atomic.Int64
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventVolatileStore && errors.Is(ev.Err, idem.ErrVolatileStore) {
			volatile.Add(int64(ev.Delta))
		}
	})
	e, err := idem.New(st, idem.Config{AllowVolatileStore: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if volatile.Load() != 1 {
		t.Fatalf("EventVolatileStore seen %d times, want 1", volatile.Load())
	}
}

// TestCheckDurabilityWithoutConfig: a server that refuses CONFIG (renamed
// away, as managed services do) is a warning that says so, not a refusal.
func TestCheckDurabilityWithoutConfig(t *testing.T) {
	t.Parallel()
	st := ownServer(t, "--appendonly", "yes", "--rename-command", "CONFIG", "")
	fs, err := st.CheckDurability(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Setting != "CONFIG" || fs[0].Severity != idem.SeverityWarning || !strings.Contains(fs[0].Problem, "refuses CONFIG GET") {
		t.Fatalf("findings %+v, want one warning about CONFIG", fs)
	}
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatalf("New on a server without CONFIG: %v", err)
	}
	e.Close()
}

// TestCheckDurabilityWarnings: RDB-only persistence and appendfsync no are
// warnings.
func TestCheckDurabilityWarnings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		setting string
	}{
		{[]string{"--save", "3600 1", "--appendonly", "no"}, "appendonly"},
		{[]string{"--appendonly", "yes", "--appendfsync", "no"}, "appendfsync"},
	} {
		st := ownServer(t, tc.args...)
		fs, err := st.CheckDurability(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || fs[0].Setting != tc.setting || fs[0].Severity != idem.SeverityWarning {
			t.Errorf("%v: findings %+v, want one warning on %s", tc.args, fs, tc.setting)
		}
	}
}

// TestStoreTime: the server's clock, read by TIME.
func TestStoreTime(t *testing.T) {
	st := newStoreOn(t, standaloneClient(t), Config{})
	got, err := st.StoreTime(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got); d.Abs() > time.Minute {
		t.Fatalf("TIME %s is %s off this host's clock", got, d)
	}
}
