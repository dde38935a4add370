package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// A local effect — a ledger row in the same database — and its record commit
// in one transaction: exactly once, with no unknown window. Retries of the
// same message replay; a rolled-back attempt leaves neither row nor record.
func ExampleStore_WithTx() {
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "app.db"), sqlitestore.Config{Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	db := st.DB() // the writer: local effects run on it
	if _, err := db.ExecContext(ctx, `CREATE TABLE ledger (msg TEXT, cents INTEGER)`); err != nil {
		fmt.Println(err)
		return
	}
	engine, _ := idem.New(st, idem.Config{})

	credit := func(msgID string, cents int64) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer tx.Rollback()
		res, err := engine.WithStore(st.WithTx(tx)).DoBytes(ctx, idem.Request{Scope: "inbox", Key: idem.Key(msgID)},
			func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
				_, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES (?, ?)`, msgID, cents)
				return []byte("credited"), err
			})
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := tx.Commit(); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(msgID, string(res.Value), "replayed:", res.Replayed)
	}
	credit("msg-1", 500)
	credit("msg-1", 500) // the broker redelivered
	credit("msg-2", 700)

	var rows, total int64
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(cents) FROM ledger`).Scan(&rows, &total)
	fmt.Println("ledger rows:", rows, "total:", total)
	// Output:
	// msg-1 credited replayed: false
	// msg-1 credited replayed: true
	// msg-2 credited replayed: false
	// ledger rows: 2 total: 1200
}
