package natsconsumer_test

// The crash tests run this test binary again as a consumer process (the
// "child"), selected by IDEM_CRASH_CHILD=1, and kill it with SIGKILL at a
// chosen point. The child announces each point on stdout before blocking
// there, so the parent kills it exactly where the test wants.

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

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/natsconsumer"
	"github.com/idemkit/idem/pgstore"
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

// child consumes IDEM_CHILD_STREAM/billing until killed, with a SQLite
// store, or in mode "pgtx" with a PostgreSQL store.
func child() error {
	ctx := context.Background()
	get := os.Getenv
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var p *consumer.Processor
	var err error
	if get("IDEM_CHILD_MODE") == "pgtx" {
		p, err = pgTxProcessor(ctx, logger)
	} else {
		p, err = sqliteProcessor(ctx, logger)
	}
	if err != nil {
		return err
	}
	nc, err := nats.Connect(get("IDEM_CHILD_NATS"))
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, get("IDEM_CHILD_STREAM"), "billing")
	if err != nil {
		return err
	}
	c, err := natsconsumer.New(js, natsconsumer.Config{Processor: p, Logger: logger})
	if err != nil {
		return err
	}
	say("READY")
	return c.Run(ctx, cons)
}

// sqliteProcessor runs the file handler (mode "plain") or the ledger
// handler in one SQLite transaction (mode "tx").
func sqliteProcessor(ctx context.Context, logger *slog.Logger) (*consumer.Processor, error) {
	get := os.Getenv
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Path: get("IDEM_CHILD_DB"), Migrate: true})
	if err != nil {
		return nil, err
	}
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
		return nil, err
	}
	cfg := consumer.Config{Engine: eng, RetryDelay: 100 * time.Millisecond, Recover: recoverFromFile(get("IDEM_CHILD_EFFECTS")), Logger: logger}
	if get("IDEM_CHILD_MODE") == "tx" {
		if _, err := st.DB().ExecContext(ctx, ledgerDDL); err != nil {
			return nil, err
		}
		b := consumer.SQL(st.DB(), func(tx *sql.Tx) idem.Store { return st.WithTx(tx) })
		return consumer.NewTx(cfg, b, ledgerHandler)
	}
	return consumer.New(cfg, fileHandler(get("IDEM_CHILD_EFFECTS"), crash, crashKey))
}

// pgTxProcessor runs the ledger handler in one pgx transaction on
// IDEM_CHILD_PG, with the records and the ledger in IDEM_CHILD_PG_SCHEMA
// (both created by the parent).
func pgTxProcessor(ctx context.Context, logger *slog.Logger) (*consumer.Processor, error) {
	get := os.Getenv
	schema := get("IDEM_CHILD_PG_SCHEMA")
	st, err := pgstore.Open(ctx, get("IDEM_CHILD_PG"), pgstore.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	lease, _ := time.ParseDuration(get("IDEM_CHILD_LEASE"))
	eng, err := idem.New(st, idem.Config{Lease: lease})
	if err != nil {
		return nil, err
	}
	ledger := pgx.Identifier{schema, "ledger"}.Sanitize()
	return consumer.NewTx(consumer.Config{Engine: eng, RetryDelay: 100 * time.Millisecond, Logger: logger},
		consumer.TxFuncs[pgx.Tx]{
			BeginFunc:    st.Pool().Begin,
			StoreFunc:    st.WithTx,
			CommitFunc:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
			RollbackFunc: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
		},
		func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+ledger+` (msg_key, amount) VALUES ($1, $2)`, m.ID, len(m.Body)); err != nil {
				return err
			}
			say("INTX %s", m.ID)
			time.Sleep(20 * time.Millisecond)
			return nil
		})
}

const ledgerDDL = `CREATE TABLE IF NOT EXISTS ledger (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_key TEXT NOT NULL, -- deliberately not unique: idem, not the ledger, must prevent doubles
	amount INTEGER NOT NULL)`

// ledgerHandler writes the effect in the consumer's transaction, announces
// it, and lingers so that a kill lands inside the transaction.
func ledgerHandler(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (msg_key, amount) VALUES (?, ?)`, m.ID, len(m.Body)); err != nil {
		return err
	}
	say("INTX %s", m.ID)
	time.Sleep(20 * time.Millisecond)
	return nil
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
