package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/idemkit/idem/mysqlstore"
	"net/url"
	"strings"

	_ "github.com/go-sql-driver/mysql" // the driver mysqlstore uses

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// MySQL/MariaDB: idem's store gets table=<scratch>, the raw side
// <scratch>_raw in the same database; both are dropped at the end.
func openMySQLTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	driverDSN, err := mysqlDriverDSN(d.Raw)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", driverDSN)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	// The pool policy mysqlstore.Open uses by default, so that both sides
	// hold as many server connections as each other.
	db.SetMaxOpenConns(mysqlstore.DefaultMaxOpenConns)
	db.SetMaxIdleConns(min(16, mysqlstore.DefaultMaxOpenConns))
	raw := &mysqlRaw{db: db, table: name + "_raw"}
	if err := raw.create(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	var flush, syncBinlog, version string
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog, VERSION()").Scan(&flush, &syncBinlog, &version); err != nil {
		flush, syncBinlog, version = "?", "?", "?"
	}
	cleanup := func(ctx context.Context) error {
		c, err := sql.Open("mysql", driverDSN)
		if err != nil {
			return err
		}
		defer c.Close()
		var errs []error
		for _, tb := range []string{name, name + "_migrations", name + "_raw"} {
			if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS `"+tb+"`"); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return &target{idemDSN: withQuery(d.Raw, "table", name), raw: raw, cleanup: cleanup,
		footprint:      mysqlFootprint(db, name),
		prefill:        sqlPrefill(db, [2]string{name + "_raw", name}, func(s string) string { return "`" + s + "`" }),
		durability:     fmt.Sprintf("%s, innodb_flush_log_at_trx_commit=%s, sync_binlog=%s", version, flush, syncBinlog),
		durabilityNote: mysqlDurabilityNote(flush)}, nil
}

// mysqlDriverDSN turns mysql://user:pass@host:port/db?params into
// go-sql-driver's form, dropping idem's own table parameter.
func mysqlDriverDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", errors.New("not a mysql://user@host:port/db URL")
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	q := u.Query()
	q.Del("table")
	// One round trip per statement, as mysqlstore does.
	q.Set("interpolateParams", "true")
	var b strings.Builder
	if u.User != nil {
		b.WriteString(u.User.Username())
		if p, ok := u.User.Password(); ok {
			b.WriteString(":" + p)
		}
		b.WriteString("@")
	}
	b.WriteString("tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/"))
	if len(q) > 0 {
		b.WriteString("?" + q.Encode())
	}
	return b.String(), nil
}

type mysqlRaw struct {
	db    *sql.DB
	table string
}

func (m *mysqlRaw) create(ctx context.Context) error {
	// The same columns, indexes and CHECK constraint as mysqlstore's table.
	_, err := m.db.ExecContext(ctx, "CREATE TABLE `"+m.table+"` ("+
		"scope VARBINARY(255) NOT NULL, `key` VARBINARY(255) NOT NULL, fingerprint BINARY(32) NOT NULL,"+
		"state VARBINARY(16) NOT NULL, fence BIGINT NOT NULL, attempt_id VARBINARY(255) NOT NULL,"+
		"intent LONGBLOB NULL, result LONGBLOB NULL, mark VARBINARY(32) NOT NULL DEFAULT '',"+
		"created_at BIGINT NOT NULL, lease_until BIGINT NULL, completed_at BIGINT NULL, expires_at BIGINT NULL,"+
		"PRIMARY KEY (scope, `key`), KEY state_created_at (state, created_at), KEY expires_at (expires_at),"+
		"CHECK (state IN ('in_progress', 'succeeded', 'failed', 'unknown'))) ENGINE=InnoDB")
	if err != nil {
		return fmt.Errorf("create the raw table: %w", err)
	}
	return nil
}

func (m *mysqlRaw) insert(ctx context.Context, key string) (bool, error) {
	now := nowMicros()
	res, err := m.db.ExecContext(ctx, "INSERT IGNORE INTO `"+m.table+"` (scope, `key`, fingerprint, state, fence, attempt_id, created_at, lease_until) "+
		"VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?)", benchScope, key, benchFingerprint[:], benchAttempt, now, now+30e6)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (m *mysqlRaw) update(ctx context.Context, key string, result []byte) error {
	now := nowMicros()
	_, err := m.db.ExecContext(ctx, "UPDATE `"+m.table+"` SET state = 'succeeded', result = ?, completed_at = ?, expires_at = ? "+
		"WHERE scope = ? AND `key` = ?", result, now, now+3600e6, benchScope, key)
	return err
}

func (m *mysqlRaw) read(ctx context.Context, key string) (bool, error) {
	return scanSQLRow(m.db.QueryRowContext(ctx, "SELECT scope, `key`, fingerprint, state, fence, attempt_id, intent, "+
		"result, mark, created_at, lease_until, completed_at, expires_at FROM `"+m.table+"` WHERE scope = ? AND `key` = ?", benchScope, key))
}

func (m *mysqlRaw) close() error { return m.db.Close() }
