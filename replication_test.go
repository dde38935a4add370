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

// replicated is a memory store whose replication check answers rep or
// err, as a real store's would.
type replicated struct {
	*memstore.Store
	rep idem.Replication
	err error
}

func (r replicated) CheckReplication(context.Context) (idem.Replication, error) { return r.rep, r.err }

var asyncStandby = idem.Replication{
	Topology: "primary with 1 asynchronous standby",
	Findings: []idem.Finding{{Setting: "synchronous_standby_names", Value: "''", Problem: "a failover loses claims",
		Fix: "name the standby", Severity: idem.SeverityRefuse}},
}

// replicationEvents records the Delta of every EventReplication.
type replicationEvents struct {
	mu     sync.Mutex
	deltas []int
}

func (r *replicationEvents) Observe(_ context.Context, ev idem.Event) {
	if ev.Kind == idem.EventReplication {
		r.mu.Lock()
		r.deltas = append(r.deltas, ev.Delta)
		r.mu.Unlock()
	}
}

func TestNewRefusesAsyncReplication(t *testing.T) {
	t.Parallel()
	_, err := idem.New(replicated{Store: memstore.New(), rep: asyncStandby}, idem.Config{})
	var rerr *idem.ReplicationError
	if !errors.Is(err, idem.ErrUnsafeReplication) || !errors.As(err, &rerr) || len(rerr.Findings) != 1 {
		t.Fatalf("New = %v, want a ReplicationError", err)
	}
	for _, want := range []string{"asynchronous replication", "synchronous_standby_names", "fix: name the standby", "AllowAsyncReplication", "1 asynchronous standby"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestNewAllowsAsyncReplicationWhenTold(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	ev := &replicationEvents{}
	e, err := idem.New(replicated{Store: memstore.New(), rep: asyncStandby},
		idem.Config{AllowAsyncReplication: true, Observer: ev, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New with AllowAsyncReplication: %v", err)
	}
	e.Close()
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "ASYNCHRONOUS REPLICATION") {
		t.Fatalf("log %q, want an error naming asynchronous replication", logs.String())
	}
	if len(ev.deltas) != 1 || ev.deltas[0] != 0 {
		t.Fatalf("EventReplication deltas %v, want [0] (unsafe)", ev.deltas)
	}
}

func TestNewReportsSafeReplication(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]idem.Store{
		"checked":   replicated{Store: memstore.New(), rep: idem.Replication{Topology: "standalone"}},
		"unchecked": memstore.New(),
	} {
		ev := &replicationEvents{}
		e, err := idem.New(st, idem.Config{Observer: ev})
		if err != nil {
			t.Fatalf("%s: New: %v", name, err)
		}
		e.Close()
		if len(ev.deltas) != 1 || ev.deltas[0] != 1 {
			t.Fatalf("%s: EventReplication deltas %v, want [1] (safe)", name, ev.deltas)
		}
	}
}

func TestNewRefusesUncheckableReplication(t *testing.T) {
	t.Parallel()
	boom := errors.New("permission denied for pg_stat_replication")
	if _, err := idem.New(replicated{Store: memstore.New(), err: boom}, idem.Config{}); !errors.Is(err, boom) {
		t.Fatalf("New = %v, want the check's error", err)
	}
	ev := &replicationEvents{}
	e, err := idem.New(replicated{Store: memstore.New(), err: boom}, idem.Config{AllowAsyncReplication: true, Observer: ev})
	if err != nil {
		t.Fatalf("New with AllowAsyncReplication: %v", err)
	}
	e.Close()
	if len(ev.deltas) != 1 || ev.deltas[0] != 0 {
		t.Fatalf("EventReplication deltas %v, want [0]", ev.deltas)
	}
}

func TestReplicationWarningLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	rep := idem.Replication{Topology: "primary with 1 synchronous standby", Findings: []idem.Finding{{Setting: "synchronous_commit", Value: "remote_write",
		Problem: "an OS crash of the standby", Fix: "on", Severity: idem.SeverityWarning}}}
	e, err := idem.New(replicated{Store: memstore.New(), rep: rep}, idem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New with a warning: %v", err)
	}
	e.Close()
	if !rep.Safe() || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "remote_write") {
		t.Fatalf("log %q, want a warning naming remote_write", logs.String())
	}
}

// notDurableStore fails every claim closed, as a store whose replicas did
// not confirm it in time does, and counts the attempts.
type notDurableStore struct {
	*memstore.Store
	claims int
}

func (s *notDurableStore) Claim(context.Context, idem.ClaimParams) (idem.ClaimResult, error) {
	s.claims++
	return idem.ClaimResult{}, &idem.NotDurableError{Msg: "replicas did not confirm the claim"}
}

// TestNotDurableClaimIsNotRetried: a claim that failed closed after the
// store waited its own bound is answered at once as store-unavailable
// (503), not retried StoreRetries times (each one another full wait),
// and its effect does not run.
func TestNotDurableClaimIsNotRetried(t *testing.T) {
	t.Parallel()
	st := &notDurableStore{Store: memstore.New()}
	e, err := idem.New(st, idem.Config{StoreRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ran := false
	_, err = e.DoBytes(context.Background(), idem.Request{Key: "k"}, func(context.Context, *idem.Attempt) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrNotDurable) || !errors.Is(err, idem.ErrStoreUnavailable) || ran {
		t.Fatalf("DoBytes = %v (ran %v); want ErrNotDurable and ErrStoreUnavailable, no effect", err, ran)
	}
	if st.claims != 1 {
		t.Fatalf("the claim was tried %d times, want 1", st.claims)
	}
}

// flipping is a memory store whose replication the test changes.
type flipping struct {
	*memstore.Store
	mu  sync.Mutex
	rep idem.Replication
}

func (f *flipping) CheckReplication(context.Context) (idem.Replication, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rep, nil
}

func (f *flipping) set(r idem.Replication) {
	f.mu.Lock()
	f.rep = r
	f.mu.Unlock()
}

// TestReplicationWatch: a setup that turns unsafe while the engine runs
// (the synchronous standby dropped) is logged at error level and the
// gauge's event says 0; safe again, 1.
func TestReplicationWatch(t *testing.T) {
	t.Parallel()
	st := &flipping{Store: memstore.New(), rep: idem.Replication{Topology: "primary with 1 synchronous standby"}}
	ev := &replicationEvents{}
	var logs syncBuffer
	e, err := idem.New(st, idem.Config{Observer: ev, ReplicationCheck: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	waitDelta := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			ev.mu.Lock()
			last := ev.deltas[len(ev.deltas)-1]
			ev.mu.Unlock()
			if last == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("EventReplication stayed at %d, want %d", last, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	st.set(asyncStandby)
	waitDelta(0)
	if !strings.Contains(logs.String(), "TURNED UNSAFE") || !strings.Contains(logs.String(), "synchronous_standby_names") {
		t.Fatalf("no error log naming the setting:\n%s", logs.String())
	}
	st.set(idem.Replication{Topology: "primary with 1 synchronous standby"})
	waitDelta(1)
}

// syncBuffer is a bytes.Buffer safe for the engine's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
