package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv/counts"
	"github.com/idemkit/idem/pgstore"
)

// tableStats reads the update counters of s's table, once every pool
// connection has had a chance to report its own: a backend flushes its
// counters at the end of a transaction at most once a second, so the test
// runs a statement on every idle connection until the count of updates
// covers what it expects (or a generous deadline passes).
func tableStats(t *testing.T, s *pgstore.Store, wantUpd int64) (upd, hot int64) {
	t.Helper()
	pool := sharedPool()
	ctx := context.Background()
	schema, table, _ := strings.Cut(s.QuotedTable(), ".")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, c := range pool.AcquireAllIdle(ctx) {
			_, _ = c.Exec(ctx, "SELECT 1")
			c.Release()
		}
		err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = $2`, unquote(schema), unquote(table)).Scan(&upd, &hot)
		if err != nil {
			t.Fatal(err)
		}
		if upd >= wantUpd || time.Now().After(deadline) {
			return upd, hot
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func unquote(s string) string { return strings.Trim(s, `"`) }

// Recording an outcome must be a HOT update: no index mentions a column a
// finish writes (migration 0002), and fillfactor leaves the page room for
// the finished row. First-time requests through the engine, from 16
// callers, with a 200-byte result, each write its own transaction
// (Unbatched; the default group commit is TestFirstTimeFinishIsHOTBatchedFinishes).
func TestFirstTimeFinishIsHOT(t *testing.T) {
	checkFirstTimeHOT(t, pgstore.Config{Unbatched: true}, 16)
}

// With group commit on, as idem bench runs it (a 1 ms window, up to 32
// writes gathered), outcomes stay HOT: claims are written in transactions
// of a few rows, so no heap page fills with rows still waiting for their
// outcome, and outcomes are not batched. One transaction for all 32 claims
// left 77–82 % HOT in idem bench (docs/performance.md).
func TestFirstTimeFinishIsHOTBatched(t *testing.T) {
	checkFirstTimeHOT(t, pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond, MaxSize: 32}}, 64)
}

// The same with group commit without a window (Batch.Eager).
func TestFirstTimeFinishIsHOTBatchedEager(t *testing.T) {
	checkFirstTimeHOT(t, pgstore.Config{Batch: pgstore.Batch{Eager: true, MaxSize: 32}}, 64)
}

// And with outcomes batched too (Config.BatchFinishes), the default:
// a batch's transaction updates at most four rows, so a page mostly keeps
// room for their finished versions. Within one transaction PostgreSQL
// cannot prune the versions it replaced, so fewer stay HOT than with
// single finishes: 91.8–96.0 % measured with the server to itself, hence
// the lower bound; a whole batch in one transaction left 64–67 %.
//
// It needs the server to itself: while other packages' tests run their
// transactions on it, PostgreSQL cannot prune the versions those
// transactions might still see, and the share fell to 77.7 % in a
// parallel run of scripts/test (single finishes stayed above 90 %). So it
// runs only with IDEM_HOT_ALONE=1, which scripts/test-long sets, alone.
func TestFirstTimeFinishIsHOTBatchedFinishes(t *testing.T) {
	if os.Getenv("IDEM_HOT_ALONE") != "1" {
		t.Skip("batched outcomes' HOT share needs the PostgreSQL server to itself (concurrent tests hold back page pruning); scripts/test-long runs it alone with IDEM_HOT_ALONE=1")
	}
	checkFirstTimeHOTAtLeast(t, pgstore.Config{Batch: pgstore.Batch{Eager: true, MaxSize: 32}, BatchFinishes: true}, 64, 0.85)
}

func checkFirstTimeHOT(t *testing.T, cfg pgstore.Config, callers int) {
	checkFirstTimeHOTAtLeast(t, cfg, callers, 0.9)
}

// checkFirstTimeHOTAtLeast runs 3,200 first-time requests from callers
// goroutines and requires at least share of their outcomes to be HOT.
func checkFirstTimeHOTAtLeast(t *testing.T, cfg pgstore.Config, callers int, share float64) {
	s := newStore(t, cfg)
	eng, err := idem.New(s, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	perCaller := 3200 / callers
	result := []byte(strings.Repeat("x", 200))
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				key := fmt.Sprintf("hot-%02d-%05d-0123456789abcdef", c, i)
				_, err := eng.DoBytes(context.Background(), idem.Request{Scope: "bench", Key: idem.Key(key), Fingerprint: idem.NewFingerprint([]byte(key))},
					func(context.Context, *idem.Attempt) ([]byte, error) { return result, nil })
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	upd, hot := tableStats(t, s, int64(callers*perCaller))
	if upd < int64(callers*perCaller) {
		t.Fatalf("pg_stat_user_tables counts %d updates, want at least %d", upd, callers*perCaller)
	}
	ratio := float64(hot) / float64(upd)
	t.Logf("%d of %d updates HOT (%.1f%%)", hot, upd, 100*ratio)
	if ratio < share {
		t.Fatalf("%d of %d updates HOT (%.1f%%), want at least %.0f%%", hot, upd, 100*ratio, 100*share)
	}
}

// Every listing the CLI makes and the bounded sweep run on an index, also
// on a table large enough that the planner has a choice. The plans are
// read with EXPLAIN (no ANALYZE: nothing runs).
func TestListAndSweepUseIndexes(t *testing.T) {
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	pool := sharedPool()
	// 50,000 terminal records a minute apart (IDEM_PLAN_ROWS to change it:
	// docs/performance.md's plans are of 1,000,000), one in a thousand
	// unknown.
	rowCount := int64(50_000)
	if v := os.Getenv("IDEM_PLAN_ROWS"); v != "" {
		n, err := counts.ParseList(v)
		if err != nil || len(n) != 1 {
			t.Fatalf("IDEM_PLAN_ROWS=%q: want one count (%v)", v, err)
		}
		rowCount = n[0]
	}
	_, err := pool.Exec(ctx, `INSERT INTO `+s.QuotedTable()+` (scope, key, fingerprint, state, fence, attempt_id, result,
		created_at, lease_until, completed_at, expires_at)
		SELECT 'bench', 'key-' || i, '\x'::bytea || sha256(i::text::bytea), CASE WHEN i % 1000 = 0 THEN 'u' ELSE 's' END,
			1, '\x01'::bytea || decode(md5(i::text), 'hex'), CASE WHEN i % 1000 = 0 THEN NULL ELSE convert_to(repeat('x', 200), 'UTF8') END,
			t, t + interval '30 seconds', t, CASE WHEN i % 1000 = 0 THEN NULL ELSE t + interval '1 day' END
		FROM generate_series(1, $1::bigint) i, LATERAL (SELECT timestamptz '2030-01-01' + i * interval '1 minute' AS t) c`, rowCount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+s.QuotedTable()); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 20, 0, 0, 0, 0, time.UTC)
	unknown, unknownArgs := s.ListSQL(idem.ListFilter{States: []idem.State{idem.StateUnknown}, Limit: 100})
	older, olderArgs := s.ListSQL(idem.ListFilter{CreatedBefore: now.Add(-24 * time.Hour), Limit: 100})
	olderUnknown, olderUnknownArgs := s.ListSQL(idem.ListFilter{States: []idem.State{idem.StateUnknown}, CreatedBefore: now.Add(-time.Hour), Limit: 100})
	for _, q := range []struct {
		name, sql string
		args      []any
		index     string
	}{
		{"list --state unknown", unknown, unknownArgs, "_unknown_idx"},
		{"list --older-than", older, olderArgs, "_created_idx"},
		{"list --state unknown --older-than", olderUnknown, olderUnknownArgs, "_unknown_idx"},
		{"sweep", s.SweepSQL(), []any{now, int64(1000)}, "_created_idx"},
		// Nothing expired, retention a day: the walk is an index range.
		{"sweep, bounded, nothing expired", s.SweepSinceSQL(), []any{time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC), int64(1000),
			time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)}, "_created_idx"},
	} {
		plan := explain(t, pool, q.sql, q.args...)
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, q.index) {
			t.Errorf("%s: want a scan of %s and no sequential scan:\n%s", q.name, q.index, plan)
		}
		if os.Getenv("IDEM_PLAN_ANALYZE") != "" {
			t.Logf("-- %s\n%s", q.name, explainAnalyze(t, pool, q.sql, q.args...))
		}
	}
}

// explainAnalyze runs query under EXPLAIN (ANALYZE, BUFFERS) in a
// transaction it rolls back (a sweep deletes nothing for good).
func explainAnalyze(t *testing.T, pool *pgxpool.Pool, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the point: nothing is kept
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN ANALYZE %s: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func explain(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// Once a store has recorded an outcome, its sweep reads only records
// created before Now minus the shortest retention it recorded (plus a
// minute): one recorded elsewhere with a shorter retention is swept late,
// once that bound passes it, and never missed; one that has expired under
// the retention this store knows is swept at once.
func TestSweepBoundByRecordedRetention(t *testing.T) {
	a := newStore(t, pgstore.Config{})
	b, err := pgstore.New(context.Background(), sharedPool(), pgstore.Config{Schema: a.Schema(), DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	// a records with a retention of an hour, b (another process) with one
	// of a minute.
	long := mustClaim(t, a, claimParams("long", "a", t0))
	mustFinish(t, a, succeed(long, "ok", t0, time.Hour))
	short := mustClaim(t, b, claimParams("short", "b", t0))
	mustFinish(t, b, succeed(short, "ok", t0, time.Minute))

	sweep := func(now time.Time) int {
		n, err := a.Sweep(ctx, idem.SweepParams{Now: now, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// At t0+2m "short" has expired, but a's walk stops at records created
	// before t0+2m-1h+1m: it is left for later.
	if n := sweep(t0.Add(2 * time.Minute)); n != 0 {
		t.Fatalf("sweep at t0+2m removed %d, want 0 (short is swept late)", n)
	}
	if _, err := a.Get(ctx, "tenant-1", "short"); err != nil {
		t.Fatalf("short: %v, want it still there", err)
	}
	// Once the bound passes its creation, both go.
	if n := sweep(t0.Add(time.Hour + time.Second)); n != 2 {
		t.Fatalf("sweep at t0+1h1s removed %d, want 2", n)
	}
	// b has recorded only a minute's retention: under the slack, it walks
	// everything and sweeps at once.
	again := mustClaim(t, b, claimParams("again", "b", t0))
	mustFinish(t, b, succeed(again, "ok", t0, time.Minute))
	if n, err := b.Sweep(ctx, idem.SweepParams{Now: t0.Add(2 * time.Minute), Limit: 100}); err != nil || n != 1 {
		t.Fatalf("b's sweep = %d, %v; want 1", n, err)
	}
}

// A table of schema version 1 or 2 with records in it, written as those
// versions wrote them (text states, text attempt ids), is migrated to the
// current layout: every record reads back as it was — an engine attempt id
// (hex) and any other id alike, the lease cleared only on terminal
// records — the unknown one is listed through the partial index, the
// expired one is swept, the in-progress one can still be heartbeaten and
// finished by its attempt, and the table keeps its owner and privileges.
func TestMigrateFromEarlierVersions(t *testing.T) {
	for _, from := range []int{1, 2} {
		t.Run(fmt.Sprintf("from-%d", from), func(t *testing.T) { testMigrateFrom(t, from, pgstore.DefaultTable) })
	}
	// A table name that needs quoting as an identifier and as a literal.
	t.Run("from-2-quoted-name", func(t *testing.T) { testMigrateFrom(t, 2, `Idem "recs" o'k`) })
}

func testMigrateFrom(t *testing.T, from int, table string) {
	pool := testPool(t)
	ctx := context.Background()
	schema := freshSchema(t, pool)
	s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.MigrateFirst(ctx, from); err != nil {
		t.Fatal(err)
	}
	role := "idem_migrate_reader_" + schema
	if _, err := pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{role}.Sanitize()+"; DROP ROLE "+pgx.Identifier{role}.Sanitize())
	if _, err := pool.Exec(ctx, "GRANT SELECT, DELETE ON "+s.QuotedTable()+" TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	hexID := "0123456789abcdef0123456789abcdef"
	lease := t0.Add(time.Minute)
	type row struct {
		key, state, attempt string
		result              []byte
		completed, expires  time.Time
	}
	rows := []row{
		{"running", "in_progress", hexID, nil, time.Time{}, time.Time{}},
		{"done", "succeeded", hexID, []byte("ok"), t0, t0.Add(time.Hour)},
		{"refused", "failed", "operator:o'brien ✓", []byte("no"), t0, t0.Add(48 * time.Hour)},
		{"lost", "unknown", "0123456789ABCDEF0123456789ABCDEF", nil, t0, time.Time{}},
	}
	for _, r := range rows {
		if _, err := pool.Exec(ctx, `INSERT INTO `+s.QuotedTable()+` (scope, key, fingerprint, state, fence, attempt_id, intent, result,
			created_at, lease_until, completed_at, expires_at) VALUES ('tenant-1', $1, $2, $3, 7, $4, $5, $6, $7, $8, $9, $10)`,
			r.key, make([]byte, 32), r.state, r.attempt, []byte(`{"op":"charge"}`), r.result, t0, lease,
			nullable(r.completed), nullable(r.expires)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate from version %d: %v", from, err)
	}
	if v, fs, err := s.CheckSchema(ctx); err != nil || v != 4 || len(fs) != 0 {
		t.Fatalf("schema version %d, %+v, %v; want 4 and no findings", v, fs, err)
	}
	for _, r := range rows {
		got, err := s.Get(ctx, "tenant-1", r.key)
		if err != nil {
			t.Fatalf("Get(%q) after the migration: %v", r.key, err)
		}
		st, _ := idem.ParseState(r.state)
		wantLease := lease
		if st.Terminal() {
			wantLease = time.Time{}
		}
		if got.State != st || got.AttemptID != r.attempt || got.Fence != 7 || string(got.Result) != string(r.result) ||
			string(got.Intent) != `{"op":"charge"}` || !got.CreatedAt.Equal(t0) || !got.LeaseUntil.Equal(wantLease) ||
			!got.CompletedAt.Equal(r.completed) || !got.ExpiresAt.Equal(r.expires) {
			t.Errorf("%s after the migration: %+v", r.key, got)
		}
	}
	got, err := s.List(ctx, idem.ListFilter{States: []idem.State{idem.StateUnknown}})
	if err != nil || len(got) != 1 || got[0].Key != "lost" {
		t.Fatalf("unknown records after the migration: %+v, %v", got, err)
	}
	if n, err := s.Sweep(ctx, idem.SweepParams{Now: t0.Add(2 * time.Hour), Limit: 10}); err != nil || n != 1 {
		t.Fatalf("sweep after the migration = %d, %v; want 1 (done)", n, err)
	}
	if err := s.Heartbeat(ctx, idem.HeartbeatParams{Scope: "tenant-1", Key: "running", Fence: 7, AttemptID: hexID,
		LeaseUntil: t0.Add(time.Hour)}); err != nil {
		t.Fatalf("heartbeat by the migrated attempt: %v", err)
	}
	if _, err := s.Finish(ctx, idem.FinishParams{Scope: "tenant-1", Key: "running", Fence: 7, AttemptID: hexID,
		State: idem.StateSucceeded, Result: []byte("ok"), CompletedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatalf("finish by the migrated attempt: %v", err)
	}
	var owner, acl string
	if err := pool.QueryRow(ctx, `SELECT pg_get_userbyid(relowner), relacl::text FROM pg_class WHERE oid = $1::regclass`,
		s.QuotedTable()).Scan(&owner, &acl); err != nil {
		t.Fatal(err)
	}
	if owner != "postgres" || !strings.Contains(acl, role+"=rd/") {
		t.Fatalf("owner %q, privileges %s; want postgres and %s=rd", owner, acl, role)
	}
	var leftover bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, table + "_v2"}.Sanitize()).Scan(&leftover); err != nil || leftover {
		t.Fatalf("the old table is still there (%v)", err)
	}
}

// nullable is t as a parameter, the zero time as NULL.
func nullable(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// TestRowLayoutIsLean: an engine attempt id is kept as its 16 bytes (and a
// tag), the state as one byte, and recording an outcome clears the lease
// (migration 0003); docs/performance.md has the bytes a record this saves.
func TestRowLayoutIsLean(t *testing.T) {
	s := newStore(t, pgstore.Config{})
	ctx := context.Background()
	eng, err := idem.New(s, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.DoBytes(ctx, idem.Request{Scope: "tenant-1", Key: "lean", Operation: "charge"},
		func(context.Context, *idem.Attempt) ([]byte, error) { return []byte(strings.Repeat("r", 200)), nil }); err != nil {
		t.Fatal(err)
	}
	var attemptBytes, stateBytes int
	var leaseCleared bool
	if err := sharedPool().QueryRow(ctx, `SELECT octet_length(attempt_id), pg_column_size(state), lease_until IS NULL FROM `+
		s.QuotedTable()+` WHERE scope = 'tenant-1' AND key = 'lean'`).Scan(&attemptBytes, &stateBytes, &leaseCleared); err != nil {
		t.Fatal(err)
	}
	if attemptBytes != 17 || stateBytes != 1 || !leaseCleared {
		t.Fatalf("attempt id %d bytes, state %d bytes, lease cleared %v; want 17, 1, true", attemptBytes, stateBytes, leaseCleared)
	}
	rec, err := s.Get(ctx, "tenant-1", "lean")
	if err != nil || rec.State != idem.StateSucceeded || len(rec.AttemptID) != 32 || !rec.LeaseUntil.IsZero() {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
}
