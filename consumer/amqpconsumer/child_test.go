package amqpconsumer_test

// The crash tests run this test binary again as a consumer process (the
// "child"), selected by IDEM_CRASH_CHILD=1, and kill it with SIGKILL at a
// chosen point. The child announces each point on stdout before blocking
// there, so the parent kills it exactly where the test wants. A SIGTERM
// stops it gracefully instead: Run settles what it holds and the connection
// is closed.

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/amqpconsumer"
	"github.com/idemkit/idem/sqlitestore"
)

// Crash points.
const (
	crashAfterClaim  = "after-claim"  // claimed, effect not started
	crashAfterEffect = "after-effect" // effect done, outcome not recorded
	crashAfterRecord = "after-record" // outcome recorded, message not acked
)

func TestMain(m *testing.M) {
	if os.Getenv("IDEM_CRASH_CHILD") == "1" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func say(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }

func block() { select {} }

// child consumes IDEM_CHILD_QUEUE with a SQLite store until killed, or until
// SIGTERM, when it stops gracefully.
func child() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	get := os.Getenv
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: get("IDEM_CHILD_DB"), Migrate: true})
	if err != nil {
		return err
	}
	defer st.Close()
	crash, crashKey := get("IDEM_CHILD_CRASH"), get("IDEM_CHILD_CRASH_KEY")
	lease, _ := time.ParseDuration(get("IDEM_CHILD_LEASE"))
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if crash == crashAfterRecord && ev.Kind == idem.EventOutcome && ev.Outcome == idem.OutcomeFirst && ev.Key == crashKey {
			say("RECORDED %s", ev.Key)
			block()
		}
	})
	eng, err := idem.New(st, idem.Config{Lease: lease, Observer: obs})
	if err != nil {
		return err
	}
	defer eng.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := consumer.New(consumer.Config{Engine: eng, RetryDelay: 100 * time.Millisecond,
		Recover: recoverFromFile(get("IDEM_CHILD_EFFECTS")), Logger: logger},
		fileHandler(get("IDEM_CHILD_EFFECTS"), crash, crashKey))
	if err != nil {
		return err
	}
	conn, err := amqp.Dial(get("IDEM_CHILD_AMQP"))
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	say("READY")
	if err := amqpconsumer.Run(ctx, ch, amqpconsumer.Config{Processor: p, Queue: get("IDEM_CHILD_QUEUE"), Logger: logger}); err != nil {
		return err
	}
	return ch.Close()
}

// fileHandler's effect is a line appended (and fsynced) to path.
func fileHandler(path, crash, crashKey string) consumer.Handler {
	return func(_ context.Context, m *consumer.Message) error {
		hit := m.ID == crashKey
		if hit && crash == crashAfterClaim {
			say("CLAIMED %s", m.ID)
			block()
		}
		if err := appendLine(path, m.ID); err != nil {
			return idem.Release(err) // the line was not written
		}
		if hit && crash == crashAfterEffect {
			say("EFFECT %s", m.ID)
			block()
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

// recoverFromFile resolves an unknown record by looking for its effect: a
// line in the effects file means it happened; none means it did not.
func recoverFromFile(path string) consumer.RecoverFunc {
	return func(_ context.Context, m *consumer.Message, _ idem.Record) (idem.Resolution, bool, error) {
		n, err := countLines(path, m.ID)
		if err != nil {
			return idem.Resolution{}, false, err
		}
		if n > 0 {
			return idem.Resolution{As: idem.StateSucceeded, Reason: "effect found in the effects file"}, true, nil
		}
		return idem.Resolution{Release: true, Reason: "no effect in the effects file"}, true, nil
	}
}

func countLines(path, want string) (int, error) {
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
