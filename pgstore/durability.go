package pgstore

import (
	"context"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/schemacheck"
)

var (
	_ idem.DurabilityChecker = (*Store)(nil)
	_ idem.StoreClock        = (*Store)(nil)
)

// CheckDurability reads the server settings, as this store's sessions see
// them, that decide whether an acknowledged commit survives a crash:
//   - fsync = off: PostgreSQL never forces its WAL to disk; an operating
//     system crash or power cut can lose committed records or corrupt the
//     database (refuse).
//   - synchronous_commit = off: a commit is acknowledged before its WAL is
//     flushed. A server crash loses at most the last few hundred
//     milliseconds of commits (three times wal_writer_delay) and the
//     database stays consistent, so this is a warning, not a refusal: a
//     claim acknowledged in that window and lost would let its effect run
//     again, a narrow window in a rare event.
//   - full_page_writes = off: a crash in the middle of a page write can
//     leave the page torn (warning).
//
// It also names the store's own Config.AsyncOutcomes (the CLI's
// async_outcomes=true), a warning: the outcomes of the last moments
// before a server crash are lost and their records answer unknown.
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if s.closed.Load() {
		return nil, errClosed("check durability")
	}
	var fsync, syncCommit, fullPages string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')`).
		Scan(&fsync, &syncCommit, &fullPages)
	if err != nil {
		return nil, wrap("check durability", err)
	}
	out := durabilityFindings(fsync, syncCommit, fullPages)
	if s.cfg.AsyncOutcomes {
		out = append(out, idem.Finding{
			Setting: "async_outcomes", Value: "true",
			Problem:  "outcomes are acknowledged before their WAL is flushed (pgstore.Config.AsyncOutcomes): a server crash loses the outcomes of its last moments (up to three times wal_writer_delay), and their records answer unknown once their lease has run out — reconciliation work, never a second effect",
			Fix:      "drop async_outcomes=true from the DSN (pgstore.Config.AsyncOutcomes) unless that trade is wanted",
			Severity: idem.SeverityWarning,
		})
	}
	return out, nil
}

// durabilityFindings judges the settings CheckDurability read.
func durabilityFindings(fsync, syncCommit, fullPages string) []idem.Finding {
	var out []idem.Finding
	if fsync == "off" {
		out = append(out, idem.Finding{
			Setting: "fsync", Value: fsync,
			Problem:  "PostgreSQL never forces its WAL to disk: a crash of the operating system or a power cut loses committed records (or corrupts the database), and their keys run again",
			Fix:      "set fsync = on in postgresql.conf (ALTER SYSTEM SET fsync = on; SELECT pg_reload_conf())",
			Severity: idem.SeverityRefuse,
		})
	}
	if syncCommit == "off" {
		out = append(out, idem.Finding{
			Setting: "synchronous_commit", Value: syncCommit,
			Problem:  "commits are acknowledged before their WAL is flushed: a server crash loses the last few hundred milliseconds of claims and outcomes (the database stays consistent), and an effect whose claim was lost can run again",
			Fix:      "set synchronous_commit = on (or local) for idem's role: ALTER ROLE name SET synchronous_commit = on",
			Severity: idem.SeverityWarning,
		})
	}
	if fullPages == "off" {
		out = append(out, idem.Finding{
			Setting: "full_page_writes", Value: fullPages,
			Problem:  "a crash during a page write can leave a torn page that recovery cannot repair, and records on it lost",
			Fix:      "set full_page_writes = on, unless the file system guarantees atomic page writes",
			Severity: idem.SeverityWarning,
		})
	}
	return out
}

// StoreTime returns the server's clock, clock_timestamp() (the time of the
// reading, not of the transaction's start as now() would be).
func (s *Store) StoreTime(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, errClosed("store time")
	}
	var t time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, wrap("store time", err)
	}
	return t, nil
}

// CheckSchema reports the schema version applied (0 when the store's
// migrations table is absent) and what is wrong with the schema: the
// records table missing, migrations not applied yet, or no unique
// constraint on exactly (scope, key) — the constraint every claim is
// decided by.
func (s *Store) CheckSchema(ctx context.Context) (version int, findings []idem.Finding, err error) {
	if s.closed.Load() {
		return 0, nil, errClosed("check schema")
	}
	ms := migrations()
	latest := ms[len(ms)-1].Version
	var hasTable, hasMigrations, unique bool
	err = s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_index i
			WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indnkeyatts = 2
			AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
				WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)) = ARRAY['key', 'scope'])`,
		s.names.table, s.names.migrations).Scan(&hasTable, &hasMigrations, &unique)
	if err != nil {
		return 0, nil, wrap("check schema", err)
	}
	if hasMigrations {
		var v *int32
		if err := s.pool.QueryRow(ctx, "SELECT max(version) FROM "+s.names.migrations).Scan(&v); err != nil {
			return 0, nil, wrap("check schema", err)
		}
		if v != nil {
			version = int(*v)
		}
	}
	return version, schemacheck.Findings(schemacheck.Schema{Table: s.names.table, HasTable: hasTable, Unique: unique,
		Version: version, Latest: latest, AddUnique: "ALTER TABLE " + s.names.table + " ADD PRIMARY KEY (scope, key)"}), nil
}
