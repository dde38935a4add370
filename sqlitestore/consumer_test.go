package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/idemkit/idem/storetest"
)

type txFixture struct {
	st  *sqlitestore.Store
	eng *idem.Engine
	// ctx bounds the test's deliveries (txDeadline): a claim that waits
	// on the caller's own transaction (the one writer connection) fails
	// the test at its deadline instead of hanging it.
	ctx context.Context
}

// txDeadline bounds the deliveries of each consumer test (their context
// ends); a store call that ignores its context fails the test binary
// after a minute (storetest.Deadline).
const txDeadline = 10 * time.Second

func newTxFixture(t *testing.T) *txFixture {
	t.Helper()
	storetest.Deadline(t, time.Minute)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), sqlitestore.Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE ledger (msg TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	dctx, cancel := context.WithTimeout(context.Background(), txDeadline)
	t.Cleanup(cancel)
	return &txFixture{st: st, eng: e, ctx: dctx}
}

func (f *txFixture) processor(t *testing.T, after func(m *consumer.Message) error) *consumer.Processor {
	t.Helper()
	p, err := consumer.NewTx(consumer.Config{Engine: f.eng, MaxDeliveries: 3},
		consumer.SQL(f.st.DB(), func(tx *sql.Tx) idem.Store { return f.st.WithTx(tx) }),
		func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (msg) VALUES (?)`, m.ID); err != nil {
				return err
			}
			return after(m)
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *txFixture) rows(t *testing.T, id string) int {
	t.Helper()
	var n int
	if err := f.st.DB().QueryRow(`SELECT count(*) FROM ledger WHERE msg = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConsumerTxSuccessCommitsEffectAndRecordTogether(t *testing.T) {
	t.Parallel()
	f := newTxFixture(t)
	p := f.processor(t, func(*consumer.Message) error { return nil })
	for i := 1; i <= 3; i++ {
		if d := p.Process(f.ctx, msg("m1", "x", i)); d.Action != consumer.ActionAck {
			t.Fatalf("delivery %d: %+v", i, d)
		}
	}
	rec, err := f.st.Get(context.Background(), "orders/billing", "m1")
	if err != nil || rec.State != idem.StateSucceeded || f.rows(t, "m1") != 1 {
		t.Fatalf("record %+v %v, rows %d", rec, err, f.rows(t, "m1"))
	}
}

// A handler error rolls its writes back; the failure is recorded outside
// the transaction, so redeliveries replay it and never write again.
func TestConsumerTxFailureRollsBackEffectAndRecordsFailure(t *testing.T) {
	t.Parallel()
	f := newTxFixture(t)
	var runs atomic.Int32
	p := f.processor(t, func(*consumer.Message) error { runs.Add(1); return errors.New("no such account") })
	for i := 1; i <= 2; i++ {
		d := p.Process(f.ctx, msg("m1", "x", i))
		if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonFailed {
			t.Fatalf("delivery %d: %+v", i, d)
		}
	}
	rec, err := f.st.Get(context.Background(), "orders/billing", "m1")
	if err != nil || rec.State != idem.StateFailed || string(rec.Result) != "no such account" {
		t.Fatalf("record %+v %v", rec, err)
	}
	if f.rows(t, "m1") != 0 || runs.Load() != 1 {
		t.Fatalf("rows %d, runs %d; want 0, 1", f.rows(t, "m1"), runs.Load())
	}
}

// Released, unknown and panicking handlers roll back (nothing happened) and
// are retried, until MaxDeliveries records the message failed.
func TestConsumerTxRollbackIsRetriedThenGivenUp(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"release": idem.Release(errors.New("busy")),
		"unknown": idem.Unknown(errors.New("timeout")),
		"panic":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newTxFixture(t)
			p := f.processor(t, func(*consumer.Message) error {
				if err == nil {
					panic("boom")
				}
				return err
			})
			for i := 1; i <= 2; i++ {
				if d := p.Process(f.ctx, msg("m1", "x", i)); d.Action != consumer.ActionRetry {
					t.Fatalf("delivery %d: %+v", i, d)
				}
				if _, gerr := f.st.Get(context.Background(), "orders/billing", "m1"); !errors.Is(gerr, idem.ErrNotFound) {
					t.Fatalf("delivery %d left a record: %v", i, gerr)
				}
			}
			d := p.Process(f.ctx, msg("m1", "x", 3))
			if d.Action != consumer.ActionDeadLetter || d.Reason != consumer.ReasonFailed {
				t.Fatalf("last delivery: %+v", d)
			}
			if f.rows(t, "m1") != 0 {
				t.Fatal("rolled-back effect is in the ledger")
			}
		})
	}
}

// msg is delivery number delivery of message id.
func msg(id, body string, delivery int) *consumer.Message {
	return &consumer.Message{ID: id, Source: "orders/billing", Subject: "orders.created", Body: []byte(body), Delivery: delivery}
}
