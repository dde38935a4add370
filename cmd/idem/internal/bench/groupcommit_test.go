package bench

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/internal/testenv"
)

// TestHeaderNamesTheGroupCommitInEffect: the report's header says what
// group commit the store runs, the CLI's default included, which the DSN's
// query does not show.
func TestHeaderNamesTheGroupCommitInEffect(t *testing.T) {
	for dsn, want := range map[string]string{
		"":              "eager (no window)",
		"?batch=0":      "off",
		"?batch=2ms":    "window 2ms",
		"?batch_size=8": "eager (no window)",
	} {
		st, err := storeopen.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "gc.db")+dsn, storeopen.Options{Migrate: true})
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if got := groupCommitOf(st); got != want {
			t.Errorf("sqlite%s: group commit %q, want %q", dsn, got, want)
		}
		_ = st.Close()
	}
}

// TestHeaderNamesThePool: on PostgreSQL the header says how many
// connections each side may open, the pool's default included, since a
// group commit's lead over the raw driver depends on it.
func TestHeaderNamesThePool(t *testing.T) {
	base := testenv.Postgres.Need(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for query, want := range map[string]int{
		"":                  max(4, runtime.NumCPU()), // pgxpool's default
		"pool_max_conns=16": 16,
	} {
		dsn := base
		if query != "" {
			dsn += sep + query
		}
		st, err := storeopen.Open(context.Background(), dsn, storeopen.Options{})
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if got := connectionsOf(st); got != want {
			t.Errorf("postgres %q: %d connections, want %d", query, got, want)
		}
		_ = st.Close()
	}
	var b strings.Builder
	if err := WriteText(&b, &Report{Header: Header{Connections: 16}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "connections    at most 16 a side") {
		t.Errorf("header without its connections line:\n%s", b.String())
	}
}

// TestMeterTakesPoolSettings: a DSN with pool settings (which both sides'
// pools take) connects the statistics meter too, instead of sending them
// to the server as unknown parameters.
func TestMeterTakesPoolSettings(t *testing.T) {
	dsn := testenv.Postgres.Need(t)
	if strings.Contains(dsn, "?") {
		dsn += "&pool_max_conns=3&pool_min_conns=1"
	} else {
		dsn += "?pool_max_conns=3&pool_min_conns=1"
	}
	m, err := newPGMeter(context.Background(), dsn, "idem_bench_meter_test", &stmtCounter{}, &stmtCounter{})
	if err != nil {
		t.Fatalf("meter on %s: %v", dsn, err)
	}
	m.close()
}
