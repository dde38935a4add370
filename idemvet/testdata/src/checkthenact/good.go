package checkthenact

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/redis/go-redis/v9"
)

// The field guide's correct code: the INSERT under a unique constraint is
// the claim, the effect comes after it.
func claimFirst(ctx context.Context, db *sql.DB, key string) error {
	if _, err := db.ExecContext(ctx, "INSERT INTO idempotency_keys (key, state) VALUES ($1, 'in_progress')", key); err != nil {
		return err // a duplicate: never re-charge
	}
	if err := charge(ctx, 5000); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "UPDATE idempotency_keys SET state = 'succeeded' WHERE key = $1", key)
	return err
}

// SET NX is a claim.
func setNX(ctx context.Context, rdb *redis.Client, m Msg) {
	if !rdb.SetNX(ctx, "seen:"+m.ID, 1, 24*time.Hour).Val() {
		return
	}
	sendEmail("e@example.com")
}

// The README's idem.Do.
func withDo(ctx context.Context, e *idem.Engine, key idem.Key) error {
	_, _, err := idem.Do(ctx, e, idem.Request{Key: key}, func(ctx context.Context, a *idem.Attempt) (int, error) {
		return 0, charge(ctx, 5000)
	})
	return err
}

// A read that guards nothing it inserts: a lookup for display.
func lookupOnly(ctx context.Context, s Store, key string) (string, error) {
	ok, err := s.Exists(ctx, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("not found")
	}
	sendEmail("f@example.com")
	return "found", nil
}

// Insert first (a claim under the table's unique key), then the effect.
func insertThenEffect(ctx context.Context, s Store, key string) error {
	if ok, _ := s.Exists(ctx, key); ok {
		return nil
	}
	if err := s.Insert(ctx, key); err != nil {
		return err
	}
	return charge(ctx, 1)
}

// Check and insert of different keys.
func otherKey(ctx context.Context, s Store, a, b string) {
	if s.IsProcessed(a) {
		return
	}
	sendEmail("g@example.com")
	s.MarkProcessed(b)
}

// Only pure work between the check and the insert.
func noEffect(ctx context.Context, s Store, key string) error {
	if ok, _ := s.Exists(ctx, key); ok {
		return errors.New("duplicate")
	}
	_ = time.Now()
	return s.Insert(ctx, key)
}

// The effect is a write on the transaction that inserts the key: both
// commit or neither does (idem's own migration runner).
func sameTx(ctx context.Context, tx *sql.Tx, version int, migration string) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM processed_migrations WHERE version = ?", version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, migration); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO processed_migrations (version) VALUES (?)", version)
	return err
}

// A fast-path check before an atomic claim: the claim decides.
func checkThenClaim(ctx context.Context, rdb *redis.Client, m Msg) {
	if rdb.Exists(ctx, "seen:"+m.ID).Val() > 0 {
		return
	}
	if !rdb.SetNX(ctx, "seen:"+m.ID, "in_progress", time.Hour).Val() {
		return
	}
	sendEmail("i@example.com")
	rdb.Set(ctx, "seen:"+m.ID, "done", 24*time.Hour)
}

type cache interface {
	Add(key string, v any)
}

type codec interface {
	Unmarshal(b []byte, v any) error
}

// A read-through cache: the read fills a local cache, nothing escapes
// (from a real-world false positive).
func readThrough(ctx context.Context, db *sql.DB, local cache, msgpack codec, key string) (string, error) {
	var raw []byte
	err := db.QueryRowContext(ctx, "SELECT value FROM cache WHERE key = $1", key).Scan(&raw)
	if err != nil {
		return "", err
	}
	var v string
	if err := msgpack.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	_, _ = json.Marshal(v)
	local.Add(key, v)
	return v, nil
}

// A library check and an error message that starts with "insert".
func notSQL(ctx context.Context, s Store, name string) error {
	if strings.HasPrefix(name, "tmp") {
		return nil
	}
	sendEmail("j@example.com")
	return fmt.Errorf("insert %s snapshot: %w", name, errors.New("x"))
}
