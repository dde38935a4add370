package bench

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/internal/testenv"
)

// The raw baseline runs on a table of idem's shape — the same CHECK
// constraints and secondary indexes as the store's — so that a ratio
// measures idem's statements, not a cheaper schema (PostgreSQL, for one,
// plans a table's CHECK constraints in every INSERT and UPDATE).
func TestRawTableHasTheStoresShape(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Postgres.Need(t)
		tg := openShapeTarget(t, dsn)
		c, err := pgx.Connect(ctx, testenv.Postgres.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		schema := storeOptionOf(t, tg.idemDSN, "schema")
		shape := func(table string) (checks, indexes []string) {
			rows, err := c.Query(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
				WHERE conrelid = ($1 || '.' || $2)::regclass AND contype = 'c'`, pgx.Identifier{schema}.Sanitize(), table)
			if err != nil {
				t.Fatal(err)
			}
			checks, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			rows, err = c.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2`, schema, table)
			if err != nil {
				t.Fatal(err)
			}
			defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			// Compare what is indexed, not the names.
			for _, d := range defs {
				_, how, _ := strings.Cut(d, " USING ")
				if strings.HasPrefix(d, "CREATE UNIQUE") {
					how = "UNIQUE " + how
				}
				indexes = append(indexes, how)
			}
			return sorted(checks), sorted(indexes)
		}
		// The columns, their types and their order: a record's bytes
		// depend on all three (alignment).
		columns := func(table string) string {
			var cols string
			if err := c.QueryRow(ctx, `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod)
				|| CASE WHEN attnotnull THEN ' not null' ELSE '' END || CASE WHEN attgenerated <> '' THEN ' generated' ELSE '' END,
				', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = ($1 || '.' || $2)::regclass AND attnum > 0 AND NOT attisdropped`,
				pgx.Identifier{schema}.Sanitize(), table).Scan(&cols); err != nil {
				t.Fatal(err)
			}
			return cols
		}
		if raw, idem := columns("raw_records"), columns("idem_records"); raw != idem {
			t.Errorf("columns:\nraw  %s\nidem %s", raw, idem)
		}
		rawChecks, rawIdx := shape("raw_records")
		idemChecks, idemIdx := shape("idem_records")
		if !slices.Equal(rawChecks, idemChecks) {
			t.Errorf("CHECK constraints: raw %q, idem %q", rawChecks, idemChecks)
		}
		if !slices.Equal(rawIdx, idemIdx) {
			t.Errorf("indexes: raw %q, idem %q", rawIdx, idemIdx)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		tg := openShapeTarget(t, mysqlTestURL(t))
		db, err := sql.Open("mysql", testenv.MySQL.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		table := storeOptionOf(t, tg.idemDSN, "table")
		column := func(q, table string) []string {
			rows, err := db.QueryContext(ctx, q, table)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
			return sorted(out)
		}
		const checksQ = `SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
			WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ?`
		const indexesQ = `SELECT CONCAT(NON_UNIQUE, ':', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX))
			FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? GROUP BY INDEX_NAME, NON_UNIQUE`
		rawChecks, idemChecks := column(checksQ, table+"_raw"), column(checksQ, table)
		if !slices.Equal(rawChecks, idemChecks) {
			t.Errorf("CHECK constraints: raw %q, idem %q", rawChecks, idemChecks)
		}
		if rawIdx, idemIdx := column(indexesQ, table+"_raw"), column(indexesQ, table); !slices.Equal(rawIdx, idemIdx) {
			t.Errorf("indexes: raw %q, idem %q", rawIdx, idemIdx)
		}
	})
}

// openShapeTarget opens the bench's target for dsn and idem's store beside
// it (migrated), as a run does; both go when the test ends.
func openShapeTarget(t *testing.T, dsn string) *target {
	ctx := context.Background()
	tg, err := openTarget(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.raw.close(); _ = tg.cleanup(ctx) })
	st, err := storeopen.Open(ctx, tg.idemDSN, storeopen.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return tg
}

// storeOptionOf returns the query parameter name of dsn.
func storeOptionOf(t *testing.T, dsn, name string) string {
	_, q, _ := strings.Cut(dsn, "?")
	m := regexp.MustCompile(`(?:^|&)` + name + `=([^&]+)`).FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("%s has no %s", dsn, name)
	}
	return m[1]
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
