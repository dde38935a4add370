package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// consumer.NewTx on PostgreSQL: claim, effect and record share a pgx transaction; many
// workers racing over redeliveries of the same messages write one ledger
// row per message, and a failing handler leaves no row.
func TestConsumerTxOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres.Need(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemt_consumer_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema+`; CREATE TABLE `+schema+`.ledger (msg text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
			c.Close(context.Background())
		}
	})
	st, err := pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var runs atomic.Int32
	p, err := consumer.NewTx(consumer.Config{Engine: eng}, consumer.TxFuncs[pgx.Tx]{
		BeginFunc:    st.Pool().Begin,
		StoreFunc:    st.WithTx,
		CommitFunc:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		RollbackFunc: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
	}, func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
		runs.Add(1)
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.ledger (msg) VALUES ($1)`, m.ID); err != nil {
			return err
		}
		if m.ID == "bad" {
			return errors.New("rejected")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c", "d", "bad"}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; round <= 3; round++ {
				for _, id := range ids {
					p.Process(ctx, msg(id, "x", round))
				}
			}
		}()
	}
	wg.Wait()
	rows, err := conn.Query(ctx, `SELECT msg, count(*) FROM `+schema+`.ledger GROUP BY msg`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	rows.Close()
	for _, id := range ids[:4] {
		if got[id] != 1 {
			t.Errorf("%s: %d ledger rows, want 1", id, got[id])
		}
	}
	if got["bad"] != 0 {
		t.Errorf("failed message left %d ledger rows", got["bad"])
	}
	rec, err := st.Get(ctx, "orders/billing", "bad")
	if err != nil || rec.State != idem.StateFailed {
		t.Fatalf("bad: record %+v, %v", rec, err)
	}
}

// msg is delivery number delivery of message id.
func msg(id, body string, delivery int) *consumer.Message {
	return &consumer.Message{ID: id, Source: "orders/billing", Subject: "orders.created", Body: []byte(body), Delivery: delivery}
}
