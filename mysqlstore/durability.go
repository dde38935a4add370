package mysqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/schemacheck"
)

var (
	_ idem.DurabilityChecker = (*Store)(nil)
	_ idem.StoreClock        = (*Store)(nil)
)

// CheckDurability reads innodb_flush_log_at_trx_commit. At 1 (the
// default) InnoDB flushes its redo log at every commit. At 2 it writes the
// log at commit but flushes it about once a second, and at 0 it does both
// once a second: a crash of the server (at 0) or of the operating system
// (at 2) loses up to a second of commits. The database stays consistent
// and the window is short and needs a crash, so it is a warning, not a
// refusal: a claim acknowledged in that second and lost would let its
// effect run again.
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	var flush string
	if err := s.db.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&flush); err != nil {
		return nil, s.wrap("check durability", err)
	}
	return durabilityFindings(flush), nil
}

// durabilityFindings judges the setting CheckDurability read.
func durabilityFindings(flush string) []idem.Finding {
	if flush == "1" {
		return nil
	}
	return []idem.Finding{{
		Setting: "innodb_flush_log_at_trx_commit", Value: flush,
		Problem:  "InnoDB flushes its redo log about once a second instead of at each commit: a crash loses up to a second of claims and outcomes, and an effect whose claim was lost can run again",
		Fix:      "SET PERSIST innodb_flush_log_at_trx_commit = 1 (MariaDB: SET GLOBAL and my.cnf)",
		Severity: idem.SeverityWarning,
	}}
}

// StoreTime returns the server's clock, NOW(6), read as microseconds since
// the epoch so that the session's time zone does not matter.
func (s *Store) StoreTime(ctx context.Context) (time.Time, error) {
	if err := s.usable(); err != nil {
		return time.Time{}, err
	}
	var us int64
	if err := s.db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)").Scan(&us); err != nil {
		return time.Time{}, s.wrap("store time", err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// CheckSchema reports the schema version applied (0 when the migrations
// table is absent) and what is wrong with the schema: the records table
// missing, migrations not applied yet, or no unique index on exactly
// (scope, key) — the constraint every claim is decided by.
func (s *Store) CheckSchema(ctx context.Context) (version int, findings []idem.Finding, err error) {
	if err := s.usable(); err != nil {
		return 0, nil, err
	}
	var hasTable, hasMigrations bool
	err = s.db.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?),
		EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?)`,
		s.table, s.table+migrationsSuffix).Scan(&hasTable, &hasMigrations)
	if err != nil {
		return 0, nil, s.wrap("check schema", err)
	}
	unique := false
	if hasTable {
		rows, err := s.db.QueryContext(ctx, `SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY COLUMN_NAME SEPARATOR ',')
			FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND NON_UNIQUE = 0
			GROUP BY INDEX_NAME`, s.table)
		if err != nil {
			return 0, nil, s.wrap("check schema", err)
		}
		for rows.Next() {
			var cols string
			if err := rows.Scan(&cols); err != nil {
				rows.Close()
				return 0, nil, s.wrap("check schema", err)
			}
			unique = unique || strings.EqualFold(cols, "key,scope")
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, nil, s.wrap("check schema", err)
		}
	}
	if hasMigrations {
		var v sql.NullString
		if err := s.db.QueryRowContext(ctx, "SELECT MAX(version) FROM `"+s.table+migrationsSuffix+"`").Scan(&v); err != nil {
			return 0, nil, s.wrap("check schema", err)
		}
		version, _ = strconv.Atoi(v.String)
	}
	latest := 0
	if len(migrations) > 0 {
		latest = migrations[len(migrations)-1].Version
	}
	return version, schemacheck.Findings(schemacheck.Schema{Table: s.table, HasTable: hasTable, Unique: unique,
		Version: version, Latest: latest, AddUnique: "ALTER TABLE `" + s.table + "` ADD PRIMARY KEY (scope, `key`)"}), nil
}
