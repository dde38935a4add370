package natsconsumer_test

// The crash tests run this test binary again as a consumer process (the
// "child"), selected by IDEM_CRASH_CHILD=1, and kill it with SIGKILL at a
// chosen point (internal/crashtest).

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/consumer/natsconsumer"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/pgstore"
)

func TestMain(m *testing.M) { crashtest.Main(m, child) }

// child consumes IDEM_CHILD_STREAM/billing until killed, with a SQLite
// store, or in mode "pgtx" with a PostgreSQL store.
func child() error {
	ctx := context.Background()
	get := os.Getenv
	logger := crashtest.Logger()
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
	crashtest.Say("READY")
	return c.Run(ctx, cons)
}

// sqliteProcessor runs the file handler (mode "plain") or the ledger
// handler in one SQLite transaction (mode "tx").
func sqliteProcessor(ctx context.Context, logger *slog.Logger) (*consumer.Processor, error) {
	c := crashtest.FromEnv()
	st, eng, err := c.Open(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.Config(eng, logger)
	if os.Getenv("IDEM_CHILD_MODE") == "tx" {
		if _, err := st.DB().ExecContext(ctx, crashtest.LedgerDDL); err != nil {
			return nil, err
		}
		b := consumer.SQL(st.DB(), func(tx *sql.Tx) idem.Store { return st.WithTx(tx) })
		return consumer.NewTx(cfg, b, crashtest.LedgerHandler)
	}
	return consumer.New(cfg, c.Handler())
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
	eng, err := idem.New(st, idem.Config{Lease: crashtest.FromEnv().Lease})
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
			crashtest.Say("INTX %s", m.ID)
			time.Sleep(20 * time.Millisecond)
			return nil
		})
}
