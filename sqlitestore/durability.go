package sqlitestore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/schemacheck"
)

var _ idem.DurabilityChecker = (*Store)(nil)

// CheckDurability reads the writer's synchronous setting. OFF hands
// writes to the operating system without ever syncing them: an operating
// system crash or power cut loses recent claims and outcomes, or corrupts
// the file (refuse; Config refuses it too, so only a connection changed
// behind the store's back can show it). NORMAL syncs the WAL only at
// checkpoints: a power cut may lose the last commits, though never corrupt
// the file (warning).
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("sqlitestore: check durability: %w", idem.ErrClosed)
	}
	var level int
	if err := s.writer.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
		return nil, translate("check durability", err)
	}
	return synchronousFindings(level), nil
}

// synchronousFindings judges PRAGMA synchronous's answer (0 OFF, 1 NORMAL,
// 2 FULL, 3 EXTRA).
func synchronousFindings(level int) []idem.Finding {
	switch level {
	case 0:
		return []idem.Finding{{Setting: "synchronous", Value: "OFF",
			Problem:  "SQLite never syncs its writes: an operating-system crash or power cut loses recent records (or corrupts the file), and their keys run again",
			Fix:      "open the store with synchronous FULL (sqlite://PATH, the default, or sync=full)",
			Severity: idem.SeverityRefuse}}
	case 1:
		return []idem.Finding{{Setting: "synchronous", Value: "NORMAL",
			Problem:  "the WAL is synced only at checkpoints: a power cut may lose the last acknowledged claims, and an effect whose claim was lost can run again",
			Fix:      "open the store with synchronous FULL (drop sync=normal from the DSN)",
			Severity: idem.SeverityWarning}}
	}
	return nil
}

// CheckSchema reports the schema version applied (0 when the migrations
// table is absent) and what is wrong with the schema: the records table
// missing, migrations not applied yet, or no unique index on exactly
// (scope, key) — the constraint every claim is decided by.
func (s *Store) CheckSchema(ctx context.Context) (version int, findings []idem.Finding, err error) {
	if s.closed.Load() {
		return 0, nil, fmt.Errorf("sqlitestore: check schema: %w", idem.ErrClosed)
	}
	const table = "idem_records"
	var hasTable, hasMigrations bool
	err = s.readers.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'idem_records'),
		EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'idem_migrations')`).Scan(&hasTable, &hasMigrations)
	if err != nil {
		return 0, nil, translate("check schema", err)
	}
	unique := false
	if hasTable {
		rows, err := s.readers.QueryContext(ctx, `SELECT il.name, ii.name FROM pragma_index_list('idem_records') il
			JOIN pragma_index_info(il.name) ii WHERE il."unique" = 1 AND il.partial = 0`)
		if err != nil {
			return 0, nil, translate("check schema", err)
		}
		cols := map[string][]string{}
		for rows.Next() {
			var idx, col string
			if err := rows.Scan(&idx, &col); err != nil {
				rows.Close()
				return 0, nil, translate("check schema", err)
			}
			cols[idx] = append(cols[idx], col)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, nil, translate("check schema", err)
		}
		for _, c := range cols {
			sort.Strings(c)
			unique = unique || strings.Join(c, ",") == "key,scope"
		}
	}
	if hasMigrations {
		if err := s.readers.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM idem_migrations").Scan(&version); err != nil {
			return 0, nil, translate("check schema", err)
		}
	}
	latest := 0
	if ms, err := migrations(s.migrations); err == nil && len(ms) > 0 {
		latest = ms[len(ms)-1].Version
	}
	return version, schemacheck.Findings(schemacheck.Schema{Table: table, HasTable: hasTable, Unique: unique,
		Version: version, Latest: latest, AddUnique: "CREATE UNIQUE INDEX idem_records_scope_key ON idem_records (scope, key)"}), nil
}
