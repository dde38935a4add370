package pgstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestCPUPerRequest measures the cost of a first-time request on a machine
// shared with other load, where wall-clock ratios do not hold still: it
// runs requests through the engine over the store and through idem bench's
// raw baseline (INSERT in_progress, then UPDATE succeeded, on a table of
// the same shape), IDEM_CPU_C at a time (64), on pools built from the same
// DSN as idem bench builds them (pgxpool's default size), and logs per
// request: this process's CPU (getrusage), the server's CPU (/proc/<pid>/stat
// of the measurement's backends and the background processes), and WAL
// (pg_current_wal_lsn and pg_stat_wal deltas, server-wide: other clients'
// writes count too). IDEM_CPU_ROUNDS short rounds (10) alternate the sides;
// the means and the median of each round's ratio to raw are logged.
//
// It runs only with IDEM_CPU_PG=<postgres URL> (the measurement creates
// and drops a schema of its own there). Besides raw and idem (the engine
// over the store) it runs "store" (Claim and Finish with the claim as the
// hint, as the engine calls them, without the engine). Raw's table has
// idem's shape: the same columns and indexes (no CHECK constraints since
// migration 0004).
// IDEM_CPU_SIDE=raw|store|idem runs one side (for -cpuprofile), =allocs
// counts allocations per request; IDEM_CPU_N sets the requests per round,
// IDEM_CPU_C the concurrency.
func TestCPUPerRequest(t *testing.T) {
	dsn := os.Getenv("IDEM_CPU_PG")
	if dsn == "" {
		t.Skip("IDEM_CPU_PG not set")
	}
	ctx := context.Background()
	// The pools' backends are told apart from other clients' by name.
	if strings.Contains(dsn, "?") {
		dsn += "&application_name=idemcpu"
	} else {
		dsn += "?application_name=idemcpu"
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	schema := "idemcpu_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	rawTable := schema + ".raw_records"
	for _, q := range []string{
		`CREATE TABLE ` + rawTable + ` (
		fence bigint NOT NULL, created_at timestamptz NOT NULL, lease_until timestamptz,
		completed_at timestamptz, expires_at timestamptz, state "char" NOT NULL,
		waiting boolean NOT NULL DEFAULT false, is_unknown boolean GENERATED ALWAYS AS (state = 'u') STORED,
		scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, fingerprint bytea NOT NULL,
		attempt_id bytea NOT NULL, mark text NOT NULL DEFAULT '', intent bytea, result bytea,
		PRIMARY KEY (scope, key)) WITH (fillfactor = 90)`,
		`CREATE INDEX ON ` + rawTable + ` (created_at)`,
		`CREATE INDEX ON ` + rawTable + ` (created_at) WHERE is_unknown`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng, err := idem.New(s, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	// The bench's callers run under a cancellable context, which pgx
	// watches during every statement.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	payload := bytes.Repeat([]byte("x"), 200)
	fp := sha256.Sum256([]byte("idem bench request"))
	attempt := strings.Repeat("a", 32)
	rawAttempt := pgstore.EncodeAttempt(attempt) // as the table stores it
	handler := func(context.Context, *idem.Attempt) ([]byte, error) { return payload, nil }
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var seq atomic.Int64
	idemOp := func(n int64) error {
		r, err := eng.DoBytes(ctx, idem.Request{Scope: "bench", Key: idem.Key(run + "-" + strconv.FormatInt(n, 10)),
			Fingerprint: idem.Fingerprint(fp), Operation: "bench"}, handler)
		if err == nil && r.Replayed {
			t.Errorf("key %d replayed", n)
		}
		return err
	}
	// storeOp is the store's part of idemOp without the engine: Claim,
	// then Finish with the claim as the hint, as the engine calls them.
	intent := []byte(`{"op":"bench"}`)
	storeOpOn := func(s *pgstore.Store) func(n int64) error {
		return func(n int64) error {
			now := time.Now()
			c, err := s.Claim(ctx, idem.ClaimParams{Scope: "bench", Key: run + "-" + strconv.FormatInt(n, 10),
				Fingerprint: idem.Fingerprint(fp), AttemptID: attempt, Intent: intent, Now: now, LeaseUntil: now.Add(30 * time.Second)})
			if err != nil {
				return err
			}
			if !c.Claimed {
				t.Errorf("key %d not claimed", n)
			}
			now = time.Now()
			_, err = s.Finish(ctx, idem.FinishParams{Scope: c.Record.Scope, Key: c.Record.Key, Fence: c.Record.Fence,
				AttemptID: c.Record.AttemptID, State: idem.StateSucceeded, Result: payload, CompletedAt: now,
				ExpiresAt: now.Add(time.Hour), Claim: c.Record})
			return err
		}
	}
	storeOp := storeOpOn(s)
	rawOp := func(n int64) error {
		key := run + "-" + strconv.FormatInt(n, 10)
		now := time.Now()
		if _, err := pool.Exec(ctx, `INSERT INTO `+rawTable+` (scope, key, fingerprint, state, fence, attempt_id, created_at, lease_until)
		VALUES ($1, $2, $3, 'p', 1, $4, $5, $6) ON CONFLICT DO NOTHING`,
			"bench", key, fp[:], rawAttempt, now, now.Add(30*time.Second)); err != nil {
			return err
		}
		now = time.Now()
		_, err := pool.Exec(ctx, `UPDATE `+rawTable+` SET state = 's', result = $1, completed_at = $2, expires_at = $3
		WHERE scope = $4 AND key = $5`, payload, now, now.Add(time.Hour), "bench", key)
		return err
	}

	conc := envInt("IDEM_CPU_C", 64)
	n := envInt("IDEM_CPU_N", 2000)
	type cost struct{ client, server, wal, walRecs, fpi float64 }
	side := func(op func(int64) error) cost {
		c0, s0 := clientCPUus(), serverCPUus(ctx, admin)
		w0 := walStat(ctx, admin)
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := op(seq.Add(1)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		c1, s1 := clientCPUus(), serverCPUus(ctx, admin)
		w1 := walStat(ctx, admin)
		f := float64(n)
		return cost{float64(c1-c0) / f, float64(s1-s0) / f, float64(w1[0]-w0[0]) / f,
			float64(w1[1]-w0[1]) / f, float64(w1[2]-w0[2]) / f}
	}
	show := func(name string, c cost) {
		t.Logf("%-17s client %6.1fµs  server %6.1fµs  total %6.1fµs  WAL %6.0f B (%.2f records, %.3f FPI)",
			name, c.client, c.server, c.client+c.server, c.wal, c.walRecs, c.fpi)
	}
	// Warm both sides' connections and statement caches.
	for range 200 {
		_ = rawOp(seq.Add(1))
		_ = idemOp(seq.Add(1))
	}
	switch os.Getenv("IDEM_CPU_SIDE") {
	case "raw":
		show("raw", side(rawOp))
		return
	case "idem":
		show("idem", side(idemOp))
		return
	case "store":
		show("store", side(storeOp))
		return
	case "allocs":
		for _, sd := range []struct {
			name string
			op   func(int64) error
		}{{"raw", rawOp}, {"store", storeOp}, {"idem", idemOp}} {
			a := testing.AllocsPerRun(2000, func() { _ = sd.op(seq.Add(1)) })
			t.Logf("%-5s %.1f allocs/request", sd.name, a)
		}
		return
	}
	// Many short rounds alternate the sides, so drift in the machine's
	// other load hits all of them alike; the means and the median of each
	// round's ratio to raw are logged.
	sides := []struct {
		name string
		op   func(int64) error
	}{{"raw", rawOp}, {"store", storeOp}, {"idem", idemOp}}
	rounds := envInt("IDEM_CPU_ROUNDS", 10)
	per := make([][]cost, len(sides))
	for i := range per {
		per[i] = make([]cost, rounds)
	}
	for r := range rounds {
		for k := range sides { // each round starts with another side
			i := (k + r) % len(sides)
			per[i][r] = side(sides[i].op)
		}
	}
	for i, sd := range sides {
		var sum cost
		var ratios []float64
		for r, c := range per[i] {
			sum.client += c.client / float64(rounds)
			sum.server += c.server / float64(rounds)
			sum.wal += c.wal / float64(rounds)
			sum.walRecs += c.walRecs / float64(rounds)
			sum.fpi += c.fpi / float64(rounds)
			raw := per[0][r]
			ratios = append(ratios, (c.client+c.server)/(raw.client+raw.server))
		}
		slices.Sort(ratios)
		show(sd.name+" mean", sum)
		t.Logf("%s/raw CPU per request: median %.3f (of %d rounds; min %.3f, max %.3f)", sd.name, ratios[len(ratios)/2], rounds, ratios[0], ratios[len(ratios)-1])
	}
	// Whether the finishing UPDATEs were HOT (no index entries written):
	// backends report their counts when idle, at most once a second.
	time.Sleep(1500 * time.Millisecond)
	rows, err := admin.Query(ctx, "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 ORDER BY relname", schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var upd, hot int64
		if err := rows.Scan(&name, &upd, &hot); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-20s %d updates, %d HOT", name, upd, hot)
	}
	rows.Close()
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// clientCPUus is this process's user+system CPU in µs.
func clientCPUus() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Sec*1e6 + int64(ru.Utime.Usec) + ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)
}

// serverCPUus sums the user+system CPU, in µs, of the measurement's
// backends (application_name idemcpu) and the server's background
// processes (WAL writer, checkpointer, background writer).
// Backends that exited since the last call take their time with them, so
// the pools must stay open across a measurement.
func serverCPUus(ctx context.Context, c *pgx.Conn) int64 {
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'idemcpu' AND pid <> pg_backend_pid() OR backend_type <> 'client backend'")
	if err != nil {
		return 0
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0
	}
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += (ut + st) * 10000 // clock ticks of 10 ms
	}
	return total
}

// walStat returns the current WAL position in bytes and pg_stat_wal's
// record and full-page-image counts.
func walStat(ctx context.Context, c *pgx.Conn) [3]int64 {
	var r [3]int64
	_ = c.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - '0/0')::bigint, wal_records, wal_fpi FROM pg_stat_wal").Scan(&r[0], &r[1], &r[2])
	return r
}
