package checkthenact

import (
	"context"
	"database/sql"
	"time"

	"github.com/redis/go-redis/v9"
)

type Store interface {
	Exists(ctx context.Context, key string) (bool, error)
	Insert(ctx context.Context, key string) error
	MarkProcessed(key string)
	IsProcessed(key string) bool
}

type Msg struct{ ID string }

func charge(ctx context.Context, amount int) error { return nil }
func sendEmail(to string)                          {}

// The field guide's textbook race.
func textbook(ctx context.Context, s Store, key string) error {
	if ok, _ := s.Exists(ctx, key); !ok { // want `check-then-act: s.Exists\(\) checks the key, charge\(\) runs the effect and s.Insert\(\) inserts`
		charge(ctx, 5000)
		return s.Insert(ctx, key)
	}
	return nil
}

// An early return on "found", the effect after it.
func earlyReturn(ctx context.Context, s Store, m Msg) {
	if s.IsProcessed(m.ID) { // want `check-then-act: s.IsProcessed\(\)`
		return
	}
	sendEmail("a@example.com")
	s.MarkProcessed(m.ID)
}

// The check's result in a variable.
func viaVariable(ctx context.Context, s Store, key string) error {
	seen, err := s.Exists(ctx, key) // want `check-then-act`
	if err != nil {
		return err
	}
	if seen {
		return nil
	}
	if err := charge(ctx, 100); err != nil {
		return err
	}
	return s.Insert(ctx, key)
}

// A SELECT count, then the effect, then the INSERT.
func sqlCount(ctx context.Context, db *sql.DB, m Msg) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM processed_messages WHERE id = $1", m.ID).Scan(&n); err != nil { // want `check-then-act: db.QueryRowContext\(\)`
		return err
	}
	if n > 0 {
		return nil
	}
	sendEmail("b@example.com")
	_, err := db.ExecContext(ctx, "INSERT INTO processed_messages (id) VALUES ($1)", m.ID)
	return err
}

// EXISTS and sql.ErrNoRows.
func sqlExists(ctx context.Context, db *sql.DB, key string) error {
	var one int
	err := db.QueryRow("SELECT 1 FROM idempotency_keys WHERE key = $1", key).Scan(&one) // want `check-then-act`
	if err == nil {
		return nil
	}
	charge(ctx, 1)
	_, err = db.Exec("INSERT INTO idempotency_keys (key) VALUES ($1)", key)
	return err
}

// Redis EXISTS then SET.
func redisCheck(ctx context.Context, rdb *redis.Client, m Msg) {
	if rdb.Exists(ctx, "seen:"+m.ID).Val() > 0 { // want `check-then-act: rdb.Exists\(\)`
		return
	}
	sendEmail("c@example.com")
	rdb.Set(ctx, "seen:"+m.ID, 1, 24*time.Hour)
}

// A consumer callback.
func consumer(s Store) func(m Msg) {
	return func(m Msg) {
		if !s.IsProcessed(m.ID) { // want `check-then-act`
			sendEmail("d@example.com")
			s.MarkProcessed(m.ID)
		}
	}
}

// A transaction does not help when the effect leaves it.
func txButExternal(ctx context.Context, tx *sql.Tx, key string) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM processed WHERE key = $1", key).Scan(&n); err != nil { // want `check-then-act`
		return err
	}
	if n > 0 {
		return nil
	}
	sendEmail("h@example.com")
	_, err := tx.ExecContext(ctx, "INSERT INTO processed (key) VALUES ($1)", key)
	return err
}
