package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFinishKnownProbesThePrimaryKey: the generic plan of the finish a
// caller holding the claim sends (finishKnown, the engine's usual finish)
// finds its row through the primary key, on an empty table and on a small
// one whose records share one created_at. A connection caches a generic
// plan after five runs of a statement and keeps it; made while the table
// was small, with created_at compared by "=", that plan probed the
// created_at index (the smaller index, so the cheaper guess), and every
// finish then walked every record created in the same microsecond — all
// of them under a fixed clock, 4–8 ms a finish at 8,500 records.
func TestFinishKnownProbesThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, conn := planStore(t, "idem_finishplan_")
	if _, err := conn.Prepare(ctx, "idem_finish_known", s.ops.sql.finishKnown); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		plan := explain(t, conn, `EXPLAIN EXECUTE idem_finish_known('tenant-1', 'k1', 1, '\x0261', 's', 'ok',
			now(), now(), '\x00', NULL, '', now(), now(), 'idem_channel', 'token')`)
		pkey := strings.Trim(s.names.replacer.Replace("{{pkey}}"), `"`)
		if !strings.Contains(plan, "using "+pkey) || strings.Contains(plan, "created_idx") {
			t.Errorf("%s: the finish's generic plan does not probe the primary key %s:\n%s", when, pkey, plan)
		}
	}
	check("empty table")

	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := conn.Exec(ctx, `INSERT INTO `+s.names.table+` (scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		SELECT 'tenant-1', 'k' || i, '\x00'::bytea, 'p', 1, '\x0261'::bytea, $1::timestamptz, $1::timestamptz
		FROM generate_series(1, 200) AS i`, at); err != nil {
		t.Fatal(err)
	}
	check("200 records created in one microsecond")
}
