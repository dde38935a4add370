package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// Files are a child's SQLite store and effects file.
type Files struct {
	DB      string // the SQLite file of idem's records
	Effects string // the effects file: one line a performed effect
}

// NewFiles names both files in a new temporary directory of t.
func NewFiles(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	return Files{DB: filepath.Join(dir, "idem.db"), Effects: filepath.Join(dir, "effects.log")}
}

// ChildEnv is the environment that gives a child these files, the crash
// point crash ("" for none) on crashKey, and a 1 s lease; FromEnv reads it.
func (f Files) ChildEnv(crash, crashKey string) []string {
	return []string{
		"IDEM_CHILD_DB=" + f.DB,
		"IDEM_CHILD_EFFECTS=" + f.Effects,
		"IDEM_CHILD_CRASH=" + crash,
		"IDEM_CHILD_CRASH_KEY=" + crashKey,
		"IDEM_CHILD_LEASE=1s",
	}
}

// EffectCounts returns how many times each key's effect happened.
func (f Files) EffectCounts(t testing.TB, keys []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, k := range keys {
		n, err := CountLines(f.Effects, k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

// Store opens the records' SQLite file, closed when t ends.
func (f Files) Store(t testing.TB) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.DB, sqlitestore.Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Proc is a running child.
type Proc struct {
	cmd   *exec.Cmd
	lines chan string
	// Stalled, when set, is called before Await fails for a line that did
	// not come, to log what the test knows of the broker's side.
	Stalled func(t testing.TB)
}

// Start runs this test binary again as a child (IDEM_CRASH_CHILD=1) with
// env added to the environment, its stderr on the test's and its stdout
// read by Await. The child is killed when t ends.
func Start(t testing.TB, env []string) *Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "IDEM_CRASH_CHILD=1"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Await returns the child's first line starting with prefix, skipping the
// lines before it. It fails t when the child exits or says nothing of the
// kind for 20 s; then, with IDEM_DEBUG set, the child is sent SIGQUIT to
// dump its goroutines first.
func (p *Proc) Await(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("child exited before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			if p.Stalled != nil {
				p.Stalled(t)
			}
			if os.Getenv("IDEM_DEBUG") != "" {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				time.Sleep(time.Second)
			}
			t.Fatalf("child never said %q", prefix)
		}
	}
}

// Kill sends SIGKILL and reaps the child. Its broker connection dies with
// it.
func (p *Proc) Kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// Stop sends SIGTERM and waits 15 s for a clean exit, failing t otherwise.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child did not stop cleanly: %v", err)
		}
	case <-time.After(15 * time.Second):
		p.Kill()
		t.Fatal("child did not stop within 15 s of SIGTERM")
	}
}

// Publisher publishes one message, its ID key, to a rig's queue.
type Publisher interface {
	Publish(t *testing.T, key, body string)
}

// PublishN publishes n payments, pay-000 and on, and returns their keys.
func PublishN(t *testing.T, p Publisher, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("pay-%03d", i)
		p.Publish(t, keys[i], fmt.Sprintf(`{"amount":%d}`, 100+i))
	}
	return keys
}

// Rig is one broker's side of KillAtEachPhase: a fresh queue, and children
// that consume it with a SQLite store (Files) and FileHandler.
type Rig interface {
	Publisher
	// Start starts a child consuming the queue, crashing at crash ("" for
	// none) on crashKey (Files.ChildEnv).
	Start(t *testing.T, crash, crashKey string) *Proc
	// Finish runs a well-behaved child until every message is settled.
	Finish(t *testing.T, keys []string)
	// Scope is the idem scope of the consumer's records.
	Scope() string
	EffectCounts(t testing.TB, keys []string) map[string]int
	Store(t testing.TB) *sqlitestore.Store
}

// KillAtEachPhase kills a child consumer with SIGKILL at each phase of one
// message, each phase on a fresh rig, in parallel; the broker redelivers
// what the child held. After recovery (Rig.Finish) every message's effect
// happened exactly once and its record is succeeded:
//   - after the claim, before the effect: the redelivery waits out the 1 s
//     lease, the record turns unknown, the RecoverFunc finds no effect and
//     releases it, and the handler runs once — the message is not lost;
//   - after the effect, before the record: the RecoverFunc finds the effect
//     and records it succeeded — the effect is not repeated;
//   - after the record, before the ack: the redelivery is acked as a replay
//     without running.
func KillAtEachPhase(t *testing.T, newRig func(t *testing.T) Rig) {
	t.Parallel()
	for _, crash := range Phases {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			keys := PublishN(t, r, 5)
			victim := keys[2]
			p := r.Start(t, crash, victim)
			p.Await(t, announce[crash])
			p.Kill()
			before := r.EffectCounts(t, keys)[victim]
			if want := map[string]int{AfterClaim: 0, AfterEffect: 1, AfterRecord: 1}[crash]; before != want {
				t.Fatalf("victim effects at the kill: %d, want %d", before, want)
			}
			r.Finish(t, keys)
			for k, n := range r.EffectCounts(t, keys) {
				if n != 1 {
					t.Errorf("%s: effect happened %d times, want 1", k, n)
				}
			}
			st := r.Store(t)
			for _, k := range keys {
				rec, err := st.Get(context.Background(), r.Scope(), k)
				if err != nil || rec.State != idem.StateSucceeded {
					t.Errorf("%s: record %+v, %v", k, rec, err)
				}
			}
		})
	}
}

// LedgerState reads the ledger's rows per key (see LedgerDDL) and the
// records' states of keys in scope from the child's database.
func (f Files) LedgerState(t testing.TB, scope string, keys []string) (map[string]int, map[string]idem.State) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.DB, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ledger := map[string]int{}
	rows, err := st.DB().Query(`SELECT msg_key, count(*) FROM ledger GROUP BY msg_key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		ledger[k] = n
	}
	rows.Close()
	recs := map[string]idem.State{}
	for _, k := range keys {
		if rec, err := st.Get(context.Background(), scope, k); err == nil {
			recs[k] = rec.State
		}
	}
	return ledger, recs
}
