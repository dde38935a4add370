package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// checked is a memory store whose durability check answers findings or
// err, as a real store's would.
type checked struct {
	*memstore.Store
	findings []idem.Finding
	err      error
}

func (c checked) CheckDurability(context.Context) ([]idem.Finding, error) { return c.findings, c.err }

var evicting = idem.Finding{Setting: "maxmemory-policy", Value: "allkeys-lru", Problem: "evicts records", Fix: "noeviction", Severity: idem.SeverityRefuse}

func TestNewRefusesAVolatileStore(t *testing.T) {
	t.Parallel()
	_, err := idem.New(checked{Store: memstore.New(), findings: []idem.Finding{evicting}}, idem.Config{})
	var verr *idem.VolatileStoreError
	if !errors.Is(err, idem.ErrVolatileStore) || !errors.As(err, &verr) || len(verr.Findings) != 1 {
		t.Fatalf("New = %v, want a VolatileStoreError", err)
	}
	for _, want := range []string{"maxmemory-policy = allkeys-lru", "fix: noeviction", "AllowVolatileStore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestNewWarnsOnAWarning(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	warn := idem.Finding{Setting: "appendfsync", Value: "no", Problem: "a crash loses 30s", Fix: "everysec", Severity: idem.SeverityWarning}
	e, err := idem.New(checked{Store: memstore.New(), findings: []idem.Finding{warn}}, idem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New with a warning: %v", err)
	}
	e.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "appendfsync") {
		t.Fatalf("log %q, want a warning naming appendfsync", logs.String())
	}
}

// TestNewRefusesAnUncheckableStore: a check that cannot run refuses too,
// unless allowed; then it is an error log and an EventVolatileStore.
func TestNewRefusesAnUncheckableStore(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	st := checked{Store: memstore.New(), err: down}
	if _, err := idem.New(st, idem.Config{}); !errors.Is(err, down) {
		t.Fatalf("New = %v, want the check's error", err)
	}
	var logs bytes.Buffer
	var seen int
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventVolatileStore {
			seen++
		}
	})
	e, err := idem.New(st, idem.Config{AllowVolatileStore: true, Observer: obs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if seen != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("events %d, log %q; want one event and an error log", seen, logs.String())
	}
}

// clocked is a memory store with a clock that runs off this host's by
// skew, and fails while down is set.
type clocked struct {
	*memstore.Store
	mu   sync.Mutex
	skew time.Duration
	down bool
}

func (c *clocked) StoreTime(context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return time.Time{}, errors.New("store down")
	}
	return time.Now().Add(c.skew), nil
}

func (c *clocked) set(skew time.Duration, down bool) {
	c.mu.Lock()
	c.skew, c.down = skew, down
	c.mu.Unlock()
}

// TestClockOffsetFollowsTheStore: the offset measured at New is used for
// every decision; it is re-measured every ClockSync, and a failed
// measurement keeps the last one.
func TestClockOffsetFollowsTheStore(t *testing.T) {
	t.Parallel()
	st := &clocked{Store: memstore.New(), skew: time.Hour}
	offsets := make(chan time.Duration, 100)
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventClockOffset {
			select {
			case offsets <- ev.Duration:
			default: // the test reads what it needs
			}
		}
	})
	failed := make(chan struct{}, 100)
	log := slog.New(signalHandler{msg: "idem: cannot read the store's clock; keeping the last offset", ch: failed})
	e, err := idem.New(st, idem.Config{ClockSync: 5 * time.Millisecond, Observer: obs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	near := func(d, want time.Duration) bool { return (d - want).Abs() < 5*time.Second }
	if off := <-offsets; !near(off, time.Hour) || !near(e.ClockOffset(), time.Hour) {
		t.Fatalf("offset at New %s, want about 1h", off)
	}
	if d := time.Until(e.Now()); !near(d, time.Hour) {
		t.Fatalf("engine time is %s off this host's, want about 1h", d)
	}
	st.set(2*time.Hour, false)
	for off := range offsets {
		if near(off, 2*time.Hour) {
			break
		}
	}
	st.set(0, true)
	<-failed
	<-failed // at least one whole failed round after the last success
	if off := e.ClockOffset(); !near(off, 2*time.Hour) {
		t.Fatalf("offset after failed measurements %s, want the last (2h) kept", off)
	}
	rec, err := e.DoBytes(context.Background(), idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(rec.Record.CreatedAt); !near(d, 2*time.Hour) {
		t.Fatalf("record created %s off this host's clock, want on the store's (2h)", d)
	}
	if d := time.Until(rec.Record.ExpiresAt); !near(d, 26*time.Hour) {
		t.Fatalf("record expires in %s by this host's clock, want the TTL on the store's (24h+2h)", d)
	}
}

// signalHandler is a slog handler that signals ch on each record with msg.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }
