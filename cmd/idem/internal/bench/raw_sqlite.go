package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	_ "modernc.org/sqlite" // the driver sqlitestore uses
)

// SQLite: idem's store and the raw table live in one scratch file next to
// the named one (same file system, same settings), removed at the end, so
// the bench never writes into a deployment's database.
func openSQLiteTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	path, query, _ := strings.Cut(d.Target, "?")
	scratch := path + "." + name
	sync := "FULL" // sqlitestore's default; ?sync=normal selects the faster setting
	if q, err := url.ParseQuery(query); err == nil && q.Get("sync") != "" {
		sync = strings.ToUpper(q.Get("sync"))
	}
	idemDSN := "sqlite://" + scratch
	if query != "" {
		idemDSN += "?" + query
	}
	remove := func(context.Context) error {
		var errs []error
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if err := os.Remove(scratch + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	raw, err := openSQLiteRaw(ctx, scratch, sync)
	if err != nil {
		_ = remove(ctx)
		return nil, err
	}
	return &target{idemDSN: idemDSN, raw: raw, cleanup: remove, footprint: sqliteFootprint(raw.w),
		prefill:        sqlPrefill(raw.w, [2]string{"raw_records", "idem_records"}, func(s string) string { return `"` + s + `"` }),
		durability:     "synchronous=" + sync + ", WAL, one writer connection",
		durabilityNote: sqliteDurabilityNote(sync)}, nil
}

// sqliteRaw mirrors sqlitestore's connection layout and schema (the same
// constraints and secondary indexes, which every write maintains): one writer (WAL,
// BEGIN IMMEDIATE) and a pool of four query-only readers.
type sqliteRaw struct {
	w, r          *sql.DB
	ins, upd, sel *sql.Stmt
}

func openSQLiteRaw(ctx context.Context, path, sync string) (*sqliteRaw, error) {
	wq := url.Values{}
	wq.Add("_pragma", "busy_timeout(5000)")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous("+sync+")")
	wq.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	s := &sqliteRaw{w: w}
	// The CHECK constraints are idem's too: SQLite evaluates them on every
	// insert and update.
	if _, err := w.ExecContext(ctx, `CREATE TABLE raw_records (
		scope TEXT NOT NULL, key TEXT NOT NULL,
		fingerprint BLOB NOT NULL CHECK (length(fingerprint) = 32),
		state TEXT NOT NULL CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown')),
		fence INTEGER NOT NULL CHECK (fence > 0), attempt_id TEXT NOT NULL, intent BLOB, result BLOB,
		mark TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, lease_until INTEGER,
		completed_at INTEGER, expires_at INTEGER, PRIMARY KEY (scope, key));
		CREATE INDEX raw_state_created ON raw_records (state, created_at);
		CREATE INDEX raw_created ON raw_records (created_at, scope, key);
		CREATE INDEX raw_sweep ON raw_records (expires_at) WHERE state IN ('succeeded', 'failed')`); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("create the raw table in %s: %w", path, err)
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(5000)")
	rq.Add("_pragma", "query_only(1)")
	if s.r, err = sql.Open("sqlite", path+"?"+rq.Encode()); err != nil {
		_ = w.Close()
		return nil, err
	}
	s.r.SetMaxOpenConns(4)
	s.r.SetMaxIdleConns(4)
	if err := s.prepare(ctx); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

func (s *sqliteRaw) prepare(ctx context.Context) (err error) {
	if s.ins, err = s.w.PrepareContext(ctx, `INSERT INTO raw_records
		(scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?) ON CONFLICT DO NOTHING`); err != nil {
		return err
	}
	if s.upd, err = s.w.PrepareContext(ctx, `UPDATE raw_records SET state = 'succeeded', result = ?,
		completed_at = ?, expires_at = ? WHERE scope = ? AND key = ?`); err != nil {
		return err
	}
	// The whole record but the scope and key the caller looked it up by,
	// as sqlitestore's Get reads it: the primary key compares them byte
	// for byte, so reading them back is work neither a hand-written layer
	// nor idem needs (it cost raw's replays ~15 % more CPU than idem's
	// read at 10k records, docs/performance.md "Growth").
	s.sel, err = s.r.PrepareContext(ctx, `SELECT fingerprint, state, fence, attempt_id, intent,
		result, mark, created_at, lease_until, completed_at, expires_at FROM raw_records WHERE scope = ? AND key = ?`)
	return err
}

func (s *sqliteRaw) insert(ctx context.Context, key string) (bool, error) {
	now := nowMicros()
	res, err := s.ins.ExecContext(ctx, benchScope, key, benchFingerprint[:], benchAttempt, now, now+30e6)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *sqliteRaw) update(ctx context.Context, key string, result []byte) error {
	now := nowMicros()
	_, err := s.upd.ExecContext(ctx, result, now, now+3600e6, benchScope, key)
	return err
}

func (s *sqliteRaw) read(ctx context.Context, key string) (bool, error) {
	var (
		state, attempt, mark      string
		fp, intent, result        []byte
		fence, created            int64
		lease, completed, expires sql.NullInt64
	)
	err := s.sel.QueryRowContext(ctx, benchScope, key).Scan(&fp, &state, &fence, &attempt, &intent, &result, &mark,
		&created, &lease, &completed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // a storm read racing the insert
	}
	return err == nil, err
}

func (s *sqliteRaw) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.ins, s.upd, s.sel} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.w.Close())
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	return errors.Join(errs...)
}

// scanSQLRow reads every column of a row, as a store's Get does; a missing
// row (a storm read racing the insert) is not an error.
func scanSQLRow(row *sql.Row) (bool, error) {
	var (
		scope, key, state, attempt, mark string
		fp, intent, result               []byte
		fence, created                   int64
		lease, completed, expires        sql.NullInt64
	)
	err := row.Scan(&scope, &key, &fp, &state, &fence, &attempt, &intent, &result, &mark, &created, &lease, &completed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
