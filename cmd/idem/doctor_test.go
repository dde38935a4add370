package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/sqlitestore"
)

// migratedSQLite returns the DSN of a migrated SQLite store in a temporary
// directory.
func migratedSQLite(t *testing.T) (dsn, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "idem.db")
	dsn = "sqlite://" + path
	if out, errs, code := runCLI("migrate", "--store", dsn); code != exitOK {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
	}
	return dsn, path
}

// TestDoctorHealthySQLite: every check passes, exit 0, and the report reads
// as below (the store's path aside).
func TestDoctorHealthySQLite(t *testing.T) {
	t.Parallel()
	dsn, _ := migratedSQLite(t)
	out, errs, code := runCLI("doctor", "--store", dsn, "--cover", "retries=1h")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
	}
	want := "idem doctor: " + dsn + `
ok       schema      version 1; unique constraint on (scope, key) present
ok       durability  keeps what it acknowledged (no eviction, persistence and syncing on)
ok       replication the store is not replicated (nothing to fail over)
ok       clock       the store is local: it shares this host's clock
ok       unknown     no unknown record
ok       retention   --ttl 24h0m0s covers every --cover window
healthy.
`
	if out != want {
		t.Fatalf("report:\n%s\nwant:\n%s", out, want)
	}
}

// TestDoctorFindings: an unknown record, a TTL shorter than a window and a
// store opened with sync=normal are each a finding with its fix; exit 3.
func TestDoctorFindings(t *testing.T) {
	t.Parallel()
	dsn, path := migratedSQLite(t)
	st, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	if _, err := st.Claim(context.Background(), idem.ClaimParams{Scope: "s", Key: "lost", AttemptID: "a1", Now: now, LeaseUntil: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(context.Background(), idem.FinishParams{Scope: "s", Key: "lost", Fence: 1, AttemptID: "a1", State: idem.StateUnknown, CompletedAt: now}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, errs, code := runCLI("doctor", "--store", dsn+"?sync=normal", "--ttl", "1h", "--cover", "dlq-replay=72h")
	if code != exitFindings {
		t.Fatalf("exit %d, want 3\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"WARNING  durability  synchronous = NORMAL",
		"fix:     open the store with synchronous FULL",
		"WARNING  unknown     unknown records = oldest 1h",
		"fix:     idem list --state unknown",
		"REFUSE   retention   --ttl = 1h0m0s",
		`fix:     raise --ttl to at least 72h0m0s, the "dlq-replay" window`,
		"3 finding(s).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestDoctorRedis: against Redis servers of the test's own, an evicting
// one and one without persistence are findings naming the setting (exit
// 3); one with AOF and noeviction is healthy (exit 0).
func TestDoctorRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"evicting", []string{"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"}, exitFindings,
			[]string{"REFUSE   durability  maxmemory-policy = allkeys-lru", "fix:     CONFIG SET maxmemory-policy noeviction", "1 finding(s)."}},
		{"no persistence", []string{"--save", "", "--appendonly", "no"}, exitFindings,
			[]string{`REFUSE   durability  appendonly, save = no, ""`, "fix:     CONFIG SET appendonly yes", "1 finding(s)."}},
		{"healthy", []string{"--appendonly", "yes"}, exitOK,
			[]string{"ok       schema      no SQL schema", "ok       durability", "ok       clock       the store's clock is", "healthy."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := testenv.StartRedis(t, tc.args...)
			out, errs, code := runCLI("doctor", "--store", dsn)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDoctorExitCodes: usage mistakes exit 2; a store that cannot be
// reached exits 1.
func TestDoctorExitCodes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--ttl", "0"}, {"--store", "nosuch"}} {
		if _, errs, code := runCLI(append([]string{"doctor"}, args...)...); code != exitUsage {
			t.Errorf("doctor %v: exit %d, want 2\n%s", args, code, errs)
		}
	}
	if _, errs, code := runCLI("doctor", "--store", "redis://127.0.0.1:1/0"); code != exitFailure {
		t.Errorf("unreachable store: exit %d, want 1\n%s", code, errs)
	}
	if _, errs, code := runCLI("doctor", "--store", "sqlite://"+filepath.Join(t.TempDir(), "none.db")); code != exitFailure {
		t.Errorf("absent SQLite file: exit %d, want 1\n%s", code, errs)
	}
}

// TestProxyRefusesRedisThatForgets: the proxy does not start on an evicting
// Redis or one without persistence (exit 2, naming the setting and its
// fix); with --allow-volatile-store it starts, warns, and /metrics shows
// idem_store_volatile 1.
func TestProxyRefusesRedisThatForgets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"evicting", "maxmemory-policy = allkeys-lru", []string{"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"}},
		{"no persistence", `appendonly, save = no, ""`, []string{"--save", "", "--appendonly", "no"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := testenv.StartRedis(t, tc.args...)
			// A proxy that starts instead of refusing is killed, failing the test.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, idemBin, "proxy", "--global-scope", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--store", dsn, "--spool", "")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
				t.Fatalf("proxy: %v, want exit 2\n%s", err, out)
			}
			for _, w := range []string{"refusing to start", tc.want, "fix: CONFIG SET", "--allow-volatile-store"} {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			p := startProxy(t, "--global-scope", "--upstream", "http://127.0.0.1:1", "--store", dsn, "--spool", "", "--admin", "127.0.0.1:0", "--allow-volatile-store")
			if !strings.Contains(p.logs(), "RUNNING ON A STORE THAT CAN FORGET") {
				t.Errorf("no loud warning in the log:\n%s", p.logs())
			}
			m := send(t, "GET", "http://"+p.admin+"/metrics", "", "")
			if !strings.Contains(m.body, "\nidem_store_volatile 1\n") {
				t.Errorf("/metrics lacks idem_store_volatile 1")
			}
		})
	}
}

// TestDoctorPostgres: a migrated schema on the test server is healthy
// (exit 0); without its primary key the missing unique constraint is a
// finding with its fix (exit 3).
func TestDoctorPostgres(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	cli := dsn + "&schema=" + schema
	if !strings.Contains(dsn, "?") {
		cli = dsn + "?schema=" + schema
	}
	if out, errs, code := runCLI("migrate", "--store", cli); code != exitOK {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := runCLI("doctor", "--store", cli)
	if code != exitOK {
		t.Fatalf("healthy: exit %d\n%s%s", code, out, errs)
	}
	for _, w := range []string{"ok       schema      version 4; unique constraint on (scope, key) present", "ok       clock       the store's clock is", "healthy."} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "ALTER TABLE "+pgx.Identifier{schema, "idem_records"}.Sanitize()+" DROP CONSTRAINT idem_records_pkey"); err != nil {
		t.Fatal(err)
	}
	out, errs, code = runCLI("doctor", "--store", cli)
	if code != exitFindings || !strings.Contains(out, "REFUSE   schema      unique constraint (scope, key) = absent") || !strings.Contains(out, "ADD PRIMARY KEY (scope, key)") {
		t.Fatalf("without the primary key: exit %d, want 3 naming the constraint and its fix\n%s%s", code, out, errs)
	}
}

// TestDoctorJSON: --json prints every check and every finding as one
// object, with the same verdict and exit code as the text report.
func TestDoctorJSON(t *testing.T) {
	t.Parallel()
	dsn, _ := migratedSQLite(t)
	out, errs, code := runCLI("doctor", "--store", dsn+"?sync=normal", "--json", "--ttl", "1h", "--cover", "dlq-replay=72h")
	if code != exitFindings {
		t.Fatalf("exit %d, want 3\n%s%s", code, out, errs)
	}
	var rep struct {
		Verdict  string `json:"verdict"`
		Findings int    `json:"findings"`
		Checks   []struct {
			Name     string `json:"name"`
			OK       string `json:"ok"`
			Findings []struct {
				Severity, Setting, Value, Problem, Fix string
			} `json:"findings"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Verdict != "findings" || rep.Findings != 2 {
		t.Fatalf("verdict %q with %d findings, want findings/2:\n%s", rep.Verdict, rep.Findings, out)
	}
	names := map[string]int{}
	for _, c := range rep.Checks {
		names[c.Name] = len(c.Findings)
		for _, f := range c.Findings {
			if f.Severity == "" || f.Setting == "" || f.Problem == "" || f.Fix == "" {
				t.Errorf("check %s: incomplete finding %+v", c.Name, f)
			}
		}
	}
	want := map[string]int{"schema": 0, "durability": 1, "replication": 0, "clock": 0, "unknown": 0, "retention": 1}
	for n, k := range want {
		if got, ok := names[n]; !ok || got != k {
			t.Errorf("check %s: %d findings (present %v), want %d", n, got, ok, k)
		}
	}
	out, errs, code = runCLI("doctor", "--store", dsn, "--json")
	if code != exitOK || !strings.Contains(out, `"verdict": "healthy"`) {
		t.Fatalf("healthy store: exit %d\n%s%s", code, out, errs)
	}
}
