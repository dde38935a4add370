package sqlitestore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// TestSweepPlan: a sweep batch picks its rows from the sweep index and
// deletes them by rowid — never a search of (state, created_at), which
// read every terminal record and sorted them on each batch (a sweep of a
// million expired records ran at ~1,300 a second).
func TestSweepPlan(t *testing.T) {
	s := newStore(t)
	got := strings.Join(queryPlan(t, s.readers, sweepQuery, 1, 1, 1000), "\n")
	if !strings.Contains(got, "USING INTEGER PRIMARY KEY (rowid=?)") || !strings.Contains(got, "USING INDEX idem_records_sweep") ||
		strings.Contains(got, "state_created") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("sweep plan:\n%s\nwant the DELETE by rowid and the batch from idem_records_sweep, no sort", got)
	}
}

// queryPlan is the detail column of EXPLAIN QUERY PLAN for query, one
// entry a step.
func queryPlan(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
