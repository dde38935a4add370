package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
)

// The store runs on a *sql.DB the application owns; interpolateParams=true
// saves a round trip per statement. With Migrate set, New applies the
// schema. The example needs a MySQL or MariaDB server, so it is compiled
// but not run.
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/app?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	store, err := mysqlstore.New(ctx, db, mysqlstore.Config{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	engine, err := idem.New(store, idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()

	res, err := engine.DoBytes(ctx, idem.Request{Scope: "acct-42", Key: "charge:v1:order-123:1"},
		func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			return []byte(`{"charged":500}`), nil // the effect, run once per key
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value), res.Replayed)
}

// A local effect (a ledger row) and its idempotency record commit together:
// a crash before Commit leaves neither, so a retry runs the effect again
// safely; a crash after leaves both, so a retry replays. The example needs a
// MySQL or MariaDB server, so it is compiled but not run.
func ExampleStore_WithTx() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app@tcp(127.0.0.1:3306)/app?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // after Commit, a no-op
	st := s.WithTx(tx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	c, err := st.Claim(ctx, idem.ClaimParams{
		Scope: "acct-42", Key: "charge:v1:order-123:1", AttemptID: "attempt-1",
		Fingerprint: idem.NewFingerprint([]byte("charge 500 EUR")), Now: now, LeaseUntil: now.Add(time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	if !c.Claimed {
		return // a replay: nothing to do (the record holds the outcome)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (order_id, amount) VALUES (?, ?)", "order-123", 500); err != nil {
		log.Fatal(err)
	}
	if _, err := st.Finish(ctx, idem.FinishParams{
		Scope: c.Record.Scope, Key: c.Record.Key, Fence: c.Record.Fence, AttemptID: c.Record.AttemptID,
		State: idem.StateSucceeded, Result: []byte(`{"charged":500}`), CompletedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour),
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
