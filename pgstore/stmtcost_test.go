package pgstore

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
)

// TestStatementCost measures the first-time statements one at a time on one
// connection: for each, IDEM_CPU_N executions on fresh keys, and per
// statement the backend's CPU (/proc/<pid>/schedstat, ns), this process's
// CPU (getrusage) and the WAL written (pg_current_wal_lsn delta; run on an
// otherwise idle server). Rounds alternate the statements; the mean of
// each figure is logged. Commits do not wait for the flush unless
// IDEM_CPU_SYNC is set. It runs only with IDEM_CPU_PG=<postgres URL>;
// IDEM_CPU_ONLY=name,name picks families.
//
// The families: raw's two statements on raw's table (twice, to show the
// noise) and on tables with the CHECK constraints idem's table had before migration 0004 (PostgreSQL
// plans them in every INSERT and UPDATE); idem's insert and finish on idem's table and on raw's; and
// variants of the finish: the plain fence without the claim's columns,
// without the wake-up, and with the wake-up's channel and token computed
// in SQL instead of passed.
func TestStatementCost(t *testing.T) {
	dsn := os.Getenv("IDEM_CPU_PG")
	if dsn == "" {
		t.Skip("IDEM_CPU_PG not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := "idemstmt_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s, err := Open(ctx, dsn, Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	raw := schema + ".raw_records"
	for _, q := range []string{
		`CREATE TABLE ` + raw + ` (
		fence bigint NOT NULL, created_at timestamptz NOT NULL, lease_until timestamptz,
		completed_at timestamptz, expires_at timestamptz, state "char" NOT NULL,
		waiting boolean NOT NULL DEFAULT false, is_unknown boolean GENERATED ALWAYS AS (state = 'u') STORED,
		scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, fingerprint bytea NOT NULL,
		attempt_id bytea NOT NULL, mark text NOT NULL DEFAULT '', intent bytea, result bytea,
		PRIMARY KEY (scope, key)) WITH (fillfactor = 90)`,
		`CREATE INDEX ON ` + raw + ` (created_at)`,
		`CREATE INDEX ON ` + raw + ` (created_at) WHERE is_unknown`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// Commits do not wait for the WAL flush here: the statements' own
	// execution is what is compared, and the flush is the same for all.
	if os.Getenv("IDEM_CPU_SYNC") == "" {
		if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
			t.Fatal(err)
		}
	}
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	attempt := encodeAttempt(strings.Repeat("a", 32))
	fp := idem.NewFingerprint([]byte("idem bench request"))
	payload := []byte(strings.Repeat("x", 200))
	intent := []byte(`{"op":"bench"}`)
	lease := 30 * time.Second
	channel, token := s.lis.channel, keyToken("bench", "k")

	// A statement family runs on a table of its own (a copy of the raw
	// table or of idem's, so that every table grows alike): ins writes the
	// in_progress row for key, upd records the outcome on it.
	type family struct {
		name string
		ins  func(key string, now time.Time) error
		upd  func(key string, now time.Time) error
	}
	exec := func(q string, args ...any) error {
		tag, err := conn.Exec(ctx, q, args...)
		if err == nil && tag.RowsAffected() != 1 {
			t.Fatalf("%d rows: %s", tag.RowsAffected(), q)
		}
		return err
	}
	tables := 0
	table := func(like string) string {
		tables++
		name := schema + ".t" + strconv.Itoa(tables)
		if _, err := conn.Exec(ctx, "CREATE TABLE "+name+" (LIKE "+like+" INCLUDING ALL)"); err != nil {
			t.Fatal(err)
		}
		return name
	}
	rawShape, idemShape := raw, s.names.table
	rawIns := func(tbl string) func(string, time.Time) error {
		q := `INSERT INTO ` + tbl + ` (scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		VALUES ($1, $2, $3, 'p', 1, $4, $5, $6) ON CONFLICT DO NOTHING`
		return func(key string, now time.Time) error {
			return exec(q, "bench", key, fp[:], attempt, now, now.Add(lease))
		}
	}
	rawUpd := func(tbl string) func(string, time.Time) error {
		q := `UPDATE ` + tbl + ` SET state = 's', result = $1, completed_at = $2, expires_at = $3
		WHERE scope = $4 AND key = $5`
		return func(key string, now time.Time) error {
			return exec(q, payload, now, now.Add(time.Hour), "bench", key)
		}
	}
	idemIns := func(q string, intent []byte) func(string, time.Time) error {
		return func(key string, now time.Time) error {
			return exec(q, "bench", key, fp[:], attempt, intent, now.UTC(), now.Add(lease).UTC())
		}
	}
	// known runs a finish statement with finishKnown's parameters.
	known := func(q string, intent []byte) func(string, time.Time) error {
		return func(key string, now time.Time) error {
			created := claimTimes[key] // as the claim stored it
			return exec(q, "bench", key, int64(1), attempt, "s", payload, now.UTC(), now.Add(time.Hour).UTC(),
				fp[:], intent, "", created.UTC(), created.Add(lease).UTC(), channel, token)
		}
	}
	var families []family
	only := os.Getenv("IDEM_CPU_ONLY") // comma-separated family names
	add := func(name, like string, ins, upd func(tbl string) func(string, time.Time) error) {
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			return
		}
		tbl := table(like)
		families = append(families, family{name, ins(tbl), upd(tbl)})
	}
	stmts := func(tbl string) statements { return buildStatements(tbl, true, "") }
	idemInsOn := func(tbl string) func(string, time.Time) error { return idemIns(stmts(tbl).insertOnly, intent) }
	finishKnownOn := func(tbl string) func(string, time.Time) error { return known(stmts(tbl).finishKnown, intent) }
	variant := func(sql string) func(tbl string) func(string, time.Time) error {
		return func(tbl string) func(string, time.Time) error {
			return known(strings.ReplaceAll(sql, "{T}", tbl), intent)
		}
	}
	// Tables of the raw shape with CHECK constraints added.
	withChecks := func(name string, checks ...string) {
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			return
		}
		tbl := table(rawShape)
		for _, c := range checks {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+tbl+" ADD CHECK ("+c+")"); err != nil {
				t.Fatal(err)
			}
		}
		families = append(families, family{name, rawIns(tbl), rawUpd(tbl)})
	}
	stateCheck, fenceCheck := "state IN ('p', 's', 'f', 'u')", "fence > 0"
	withChecks("raw+state-check", stateCheck)
	withChecks("raw+fence-check", fenceCheck)
	withChecks("raw+both-checks", stateCheck, fenceCheck)
	withChecks("raw+one-combined-check", stateCheck+" AND "+fenceCheck)
	add("raw", rawShape, rawIns, rawUpd)
	add("raw-again", rawShape, rawIns, rawUpd)
	add("raw-on-idem-table", idemShape, rawIns, rawUpd)
	add("idem", idemShape, idemInsOn, finishKnownOn)
	add("idem-on-raw-table", rawShape, idemInsOn, finishKnownOn)
	add("idem-ins/raw-upd", idemShape, idemInsOn, rawUpd)
	// The usual fence (finishTerminal's WHERE) without the hint's columns;
	// $9..$13 are used where they cost nothing per row.
	add("upd-fence-only", idemShape, idemInsOn, variant(`UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8,
	waiting = CASE WHEN waiting THEN pg_notify($14::text, $15::text) IS NOT NULL ELSE false END
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u')
	AND $9::bytea IS NOT NULL AND $10::bytea IS NOT NULL AND $11::text IS NOT NULL AND $12::timestamptz IS NOT NULL AND $13::timestamptz IS NOT NULL`))
	add("finishKnown-no-notify", idemShape, idemInsOn, variant(`UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u')
	AND fingerprint = $9 AND intent IS NOT DISTINCT FROM $10 AND mark = $11 AND created_at = $12
	AND lease_until IS NOT DISTINCT FROM $13 AND $14::text IS NOT NULL AND $15::text IS NOT NULL`))
	// The same finish with 13 parameters: no channel and token.
	known13 := func(sql string) func(tbl string) func(string, time.Time) error {
		return func(tbl string) func(string, time.Time) error {
			q := strings.ReplaceAll(sql, "{T}", tbl)
			return func(key string, now time.Time) error {
				created := claimTimes[key]
				return exec(q, "bench", key, int64(1), attempt, "s", payload, now.UTC(), now.Add(time.Hour).UTC(),
					fp[:], intent, "", created.UTC(), created.Add(lease).UTC())
			}
		}
	}
	const knownWhere = `
WHERE scope = $1 AND key = $2 AND fence = $3 AND attempt_id = $4 AND state IN ('p', 'u')
	AND fingerprint = $9 AND intent IS NOT DISTINCT FROM $10 AND mark = $11 AND created_at = $12
	AND lease_until IS NOT DISTINCT FROM $13`
	add("finishKnown-13-nonotify", idemShape, idemInsOn, known13(`UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8`+knownWhere))
	add("finishKnown-sqltoken", idemShape, idemInsOn, known13(`UPDATE {T} SET state = $5, result = $6, completed_at = $7, expires_at = $8,
	waiting = CASE WHEN waiting THEN pg_notify('`+channel+`', encode(substr(sha256(convert_to($1, 'UTF8') || '\x00'::bytea || convert_to($2, 'UTF8')), 1, 16), 'hex')) IS NOT NULL ELSE false END`+knownWhere))
	n := envInt("IDEM_CPU_N", 3000)
	type cost struct{ server, client, wal float64 }
	mean := make([][2]cost, len(families))
	rounds := envInt("IDEM_CPU_ROUNDS", 10)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	seq := 0
	measure := func(keys []string, step func(string, time.Time) error) cost {
		s0, c0, w0 := schedNS(pid), clientNS(), walLSN(ctx, conn)
		for _, k := range keys {
			if err := step(k, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		s1, c1, w1 := schedNS(pid), clientNS(), walLSN(ctx, conn)
		f := float64(len(keys))
		return cost{float64(s1-s0) / f / 1e3, float64(c1-c0) / f / 1e3, float64(w1-w0-walLSNSelf) / f}
	}
	for r := range rounds {
		// Each round starts with another family: the position in a round
		// must not favour one.
		for f := range families {
			i := (f + r) % len(families)
			fam := families[i]
			keys := make([]string, n)
			for j := range keys {
				seq++
				keys[j] = run + "-" + strconv.Itoa(seq)
			}
			claimTimes = make(map[string]time.Time, n)
			ins := measure(keys, func(k string, now time.Time) error {
				now = now.Truncate(time.Microsecond)
				claimTimes[k] = now
				return fam.ins(k, now)
			})
			upd := measure(keys, fam.upd)
			for j, c := range [2]cost{ins, upd} {
				m := &mean[i][j]
				m.server += c.server / float64(rounds)
				m.client += c.client / float64(rounds)
				m.wal += c.wal / float64(rounds)
			}
		}
	}
	rows, _ := conn.Query(ctx, "SELECT left(regexp_replace(statement, '\\s+', ' ', 'g'), 90), generic_plans, custom_plans FROM pg_prepared_statements")
	for rows.Next() {
		var q string
		var g, c int64
		_ = rows.Scan(&q, &g, &c)
		t.Logf("generic %6d custom %6d  %s", g, c, q)
	}
	rows.Close()
	for i, fam := range families {
		t.Logf("%-22s insert: server %5.1fµs client %5.1fµs WAL %4.0f B | update: server %5.1fµs client %5.1fµs WAL %4.0f B",
			fam.name, mean[i][0].server, mean[i][0].client, mean[i][0].wal, mean[i][1].server, mean[i][1].client, mean[i][1].wal)
	}
}

// claimTimes holds the creation time each measured key was inserted with.
var claimTimes map[string]time.Time

// walLSNSelf is what walLSN's own query adds to the WAL: nothing (a read).
const walLSNSelf = 0

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// schedNS is the CPU time of process pid in ns (/proc/<pid>/schedstat).
func schedNS(pid uint32) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v
}

// clientNS is this process's user+system CPU in ns.
func clientNS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return (ru.Utime.Sec*1e6 + int64(ru.Utime.Usec) + ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)) * 1e3
}

func walLSN(ctx context.Context, c *pgx.Conn) int64 {
	var v int64
	_ = c.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - '0/0')::bigint").Scan(&v)
	return v
}
