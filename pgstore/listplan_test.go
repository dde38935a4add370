package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// TestListOneStateWalksStateIndex: a List of one state walks the (state,
// created_at) index in created_at order and stops at the limit, with or
// without a cursor, on a table where that state holds half the rows. The
// form `state = ANY($1)` made the planner sort every row of the state
// instead (half a second for the first page of a million records).
func TestListOneStateWalksStateIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, conn := planStore(t, "idem_listplan_")
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `INSERT INTO `+s.names.table+` (scope, key, fingerprint, state, fence, attempt_id, created_at)
		SELECT '', 'k' || i, '\x00'::bytea, CASE WHEN i % 2 = 0 THEN 'u' ELSE 's' END, 1, '\x0261'::bytea,
		       $1::timestamptz + i * interval '1 second'
		FROM generate_series(0, 99999) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+s.names.table); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]idem.ListFilter{
		"first page": {States: []idem.State{idem.StateUnknown}, Limit: 51},
		"cursor":     {States: []idem.State{idem.StateUnknown}, Limit: 51, After: &idem.Cursor{CreatedAt: base.Add(50000 * time.Second)}},
		"older than": {States: []idem.State{idem.StateUnknown}, Limit: 51, CreatedBefore: base.Add(90000 * time.Second)},
	} {
		q, args := listQuery(s.ops.sql.list, f)
		p := explain(t, conn, "EXPLAIN "+q, args...)
		if !strings.Contains(p, "Index Scan using") || !strings.Contains(p, "Presorted Key: created_at") {
			t.Errorf("%s: the plan does not walk an index in created_at order (the partial index on unknown records):\n%s", name, p)
		}
	}
}

// planStore opens a migrated store in a fresh schema named after prefix
// and a connection of the test's own to read plans on; both are closed
// and the schema dropped when t ends.
func planStore(t *testing.T, prefix string) (*Store, *pgx.Conn) {
	t.Helper()
	dsn := testenv.Postgres.Need(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	s, err := Open(ctx, dsn, Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = conn.Close(ctx)
	})
	return s, conn
}

// explain runs an EXPLAIN statement on conn and returns its plan, one
// trimmed line per row.
func explain(t *testing.T, conn *pgx.Conn, q string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "\n")
}
