package sqlitestore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestListOneStateWalksStateIndex: on a store where the state asked for
// is rare and ANALYZE has run, a List of one state — with or without a
// cursor or an age bound — still walks the (state, created_at) index
// rather than scanning every record in creation order (which read a
// million rows for the first page of unknown records).
func TestListOneStateWalksStateIndex(t *testing.T) {
	t.Parallel()
	path := tempPath(t)
	openAt(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
		INSERT INTO idem_records (scope, key, fingerprint, state, fence, attempt_id, created_at)
		SELECT '', printf('k%05d', i), zeroblob(32), CASE WHEN i % 1000 = 0 THEN 'unknown' ELSE 'succeeded' END, 1, 'a', 1000000 + i FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	mid := time.UnixMicro(1010000).UTC()
	for name, f := range map[string]idem.ListFilter{
		"first page":  {States: []idem.State{idem.StateUnknown}, Limit: 51},
		"cursor":      {States: []idem.State{idem.StateUnknown}, Limit: 51, After: &idem.Cursor{CreatedAt: mid}},
		"older than":  {States: []idem.State{idem.StateUnknown}, Limit: 51, CreatedBefore: mid},
		"in_progress": {States: []idem.State{idem.StateInProgress}, Limit: 51, After: &idem.Cursor{CreatedAt: mid}},
	} {
		q, args := listQuery(f)
		p := strings.Join(queryPlan(t, db, q, args...), "; ")
		if !strings.Contains(p, "idem_records_state_created (state=?") {
			t.Errorf("%s: plan %q does not walk the (state, created_at) index", name, p)
		}
		if f.After != nil && !strings.Contains(p, "created_at>") {
			t.Errorf("%s: plan %q does not bound created_at by the cursor", name, p)
		}
	}
}
