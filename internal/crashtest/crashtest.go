// Package crashtest is the harness of the broker consumers' crash tests
// (consumer/amqpconsumer, consumer/natsconsumer).
//
// A crash test runs its own test binary again as a consumer process, the
// child, selected by IDEM_CRASH_CHILD=1 (see Main), and kills it with
// SIGKILL at a chosen point. The child announces each point on stdout (Say)
// before blocking there (Block), so the parent (Start, Proc.Await) kills it
// exactly where the test wants.
//
// The child's effect is a line appended to an effects file (FileHandler),
// and its RecoverFunc resolves an unknown record by looking for that line
// (RecoverFromFile); its records are kept in a SQLite file. Files names
// both, and KillAtEachPhase is the test that kills a child at each Phase of
// one message against any broker that implements Rig.
package crashtest

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/sqlitestore"
)

// The crash points of one message.
const (
	AfterClaim  = "after-claim"  // claimed, effect not started
	AfterEffect = "after-effect" // effect done, outcome not recorded
	AfterRecord = "after-record" // outcome recorded, message not acked
)

// Phases are the crash points, in the order a message passes them.
var Phases = []string{AfterClaim, AfterEffect, AfterRecord}

// announce is what a child says on reaching each crash point.
var announce = map[string]string{AfterClaim: "CLAIMED", AfterEffect: "EFFECT", AfterRecord: "RECORDED"}

// Main is the body of a crash test package's TestMain: in a child
// (IDEM_CRASH_CHILD=1) it runs child and exits 0, or 2 when child fails;
// otherwise it runs the tests.
func Main(m *testing.M, child func() error) {
	if os.Getenv("IDEM_CRASH_CHILD") == "1" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Say writes one line to stdout, where the parent reads it.
func Say(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }

// Block blocks forever: the child waits there to be killed.
func Block() { select {} }

// Logger is a child's logger: warnings and errors, to stderr.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Child is a child's setup, read from the environment that Files.ChildEnv
// gives it.
type Child struct {
	Files
	Crash    string        // the crash point, or "" for none
	CrashKey string        // the message (ID) to crash on
	Lease    time.Duration // idem's lease
}

// FromEnv reads the child's setup from its environment.
func FromEnv() Child {
	lease, _ := time.ParseDuration(os.Getenv("IDEM_CHILD_LEASE"))
	return Child{
		Files:    Files{DB: os.Getenv("IDEM_CHILD_DB"), Effects: os.Getenv("IDEM_CHILD_EFFECTS")},
		Crash:    os.Getenv("IDEM_CHILD_CRASH"),
		CrashKey: os.Getenv("IDEM_CHILD_CRASH_KEY"),
		Lease:    lease,
	}
}

// Open opens the child's SQLite store and an engine on it whose observer,
// at AfterRecord, says RECORDED and blocks once the crash key's first
// outcome is recorded. The caller closes both.
func (c Child) Open(ctx context.Context) (*sqlitestore.Store, *idem.Engine, error) {
	st, err := sqlitestore.Open(ctx, c.DB, sqlitestore.Config{Migrate: true})
	if err != nil {
		return nil, nil, err
	}
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if c.Crash == AfterRecord && ev.Kind == idem.EventOutcome && ev.Outcome == idem.OutcomeFirst && ev.Key == c.CrashKey {
			Say("RECORDED %s", ev.Key)
			Block()
		}
	})
	eng, err := idem.New(st, idem.Config{Lease: c.Lease, Observer: obs})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, eng, nil
}

// Config is the child's consumer configuration: eng, a 100 ms retry delay
// and RecoverFromFile on the effects file.
func (c Child) Config(eng *idem.Engine, logger *slog.Logger) consumer.Config {
	return consumer.Config{Engine: eng, RetryDelay: 100 * time.Millisecond, Recover: RecoverFromFile(c.Effects), Logger: logger}
}

// Handler is FileHandler on the child's effects file and crash point.
func (c Child) Handler() consumer.Handler { return FileHandler(c.Effects, c.Crash, c.CrashKey) }

// FileHandler's effect is the message ID appended (and fsynced) to path as
// a line. On crashKey it says CLAIMED and blocks before the effect when
// crash is AfterClaim, or says EFFECT and blocks after it when crash is
// AfterEffect.
func FileHandler(path, crash, crashKey string) consumer.Handler {
	return func(_ context.Context, m *consumer.Message) error {
		hit := m.ID == crashKey
		if hit && crash == AfterClaim {
			Say("CLAIMED %s", m.ID)
			Block()
		}
		if err := appendLine(path, m.ID); err != nil {
			return idem.Release(err) // the line was not written
		}
		if hit && crash == AfterEffect {
			Say("EFFECT %s", m.ID)
			Block()
		}
		return nil
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

// RecoverFromFile resolves an unknown record by looking for its effect: a
// line in the effects file at path means it happened; none means it did
// not.
func RecoverFromFile(path string) consumer.RecoverFunc {
	return func(_ context.Context, m *consumer.Message, _ idem.Record) (idem.Resolution, bool, error) {
		n, err := CountLines(path, m.ID)
		if err != nil {
			return idem.Resolution{}, false, err
		}
		if n > 0 {
			return idem.Resolution{As: idem.StateSucceeded, Reason: "effect found in the effects file"}, true, nil
		}
		return idem.Resolution{Release: true, Reason: "no effect in the effects file"}, true, nil
	}
}

// CountLines counts the lines of the file at path that are want; a missing
// file has none.
func CountLines(path, want string) (int, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.TrimSpace(s.Text()) == want {
			n++
		}
	}
	return n, s.Err()
}

// LedgerDDL creates the ledger table that LedgerHandler writes: the local
// effect of the consumers' transactional crash tests. msg_key is
// deliberately not unique: idem, not the ledger, must prevent doubles.
const LedgerDDL = `CREATE TABLE IF NOT EXISTS ledger (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_key TEXT NOT NULL,
	amount INTEGER NOT NULL)`

// LedgerHandler writes the effect in the consumer's transaction, announces
// it ("INTX key"), and lingers so that a kill lands inside the transaction.
func LedgerHandler(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (msg_key, amount) VALUES (?, ?)`, m.ID, len(m.Body)); err != nil {
		return err
	}
	Say("INTX %s", m.ID)
	time.Sleep(20 * time.Millisecond)
	return nil
}
