// Command inbox shows the transactional inbox: each message's claim, its
// ledger row and its record commit in one SQLite transaction, so a ledger
// row exists exactly when the message is recorded as processed: true
// exactly-once for a local effect, with no broker needed to run it.
//
//	go run ./examples/inbox
//
// The same processor runs on a broker through natsconsumer or amqpconsumer
// (see docs/messaging.md); here messages are handed to it directly,
// duplicates and a changed payload included.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/sqlitestore"
)

const ledgerDDL = `CREATE TABLE IF NOT EXISTS ledger (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id TEXT NOT NULL,
	account TEXT NOT NULL,
	cents INTEGER NOT NULL)`

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "idem-inbox")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "inbox.db"), sqlitestore.Config{Migrate: true})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, ledgerDDL); err != nil {
		return err
	}
	// The records (24h by default) must outlast every redelivery of a
	// message: on a broker, name its redelivery and dead-letter replay
	// windows in Cover, and idem.New refuses a TTL shorter than them.
	eng, err := idem.New(st, idem.Config{Cover: map[string]time.Duration{"redelivery": time.Hour}})
	if err != nil {
		return err
	}
	defer eng.Close()

	// The effect: one ledger row, written in the transaction that also
	// holds the claim and the record.
	credit := func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		var body struct{ Cents int64 }
		if err := json.Unmarshal(m.Body, &body); err != nil {
			return err
		}
		if m.Headers["account"] == "" {
			return errors.New("no account") // rolled back, recorded failed
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger (message_id, account, cents) VALUES (?, ?, ?)`,
			m.ID, m.Headers["account"], body.Cents)
		return err
	}
	p, err := consumer.NewTx(consumer.Config{Engine: eng},
		consumer.SQL(st.DB(), func(tx *sql.Tx) idem.Store { return st.WithTx(tx) }), credit)
	if err != nil {
		return err
	}

	deliveries := []*consumer.Message{
		msg("m-1", "alice", `{"cents":500}`, 1),
		msg("m-2", "bob", `{"cents":70}`, 1),
		msg("m-1", "alice", `{"cents":500}`, 2),   // redelivery: acked, not applied
		msg("m-2", "bob", `{"cents":7000}`, 2),    // same id, other payload: mismatch
		msg("m-3", "", `{"cents":1}`, 1),          // handler error: recorded, dead-lettered
		msg("m-3", "", `{"cents":1}`, 2),          // its redelivery replays the failure
		msg("m-4", "carol", `{"cents":12345}`, 1), // applied
	}
	for _, m := range deliveries {
		d := p.Process(ctx, m)
		fmt.Fprintf(w, "%s (delivery %d): %-11s %-8s %s\n", m.ID, m.Delivery, d.Action, d.Outcome, d.Reason)
	}
	return printLedger(ctx, w, st.DB())
}

func msg(id, account, body string, delivery int) *consumer.Message {
	return &consumer.Message{ID: id, Source: "payments/ledger", Body: []byte(body), Delivery: delivery,
		Headers: map[string]string{"account": account}}
}

func printLedger(ctx context.Context, w io.Writer, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT message_id, account, cents FROM ledger ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintln(w, "ledger:")
	for rows.Next() {
		var id, acct string
		var cents int
		if err := rows.Scan(&id, &acct, &cents); err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s %-6s %d\n", id, acct, cents)
	}
	return rows.Err()
}
