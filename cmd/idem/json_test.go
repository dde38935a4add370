package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// TestEveryCommandTakesJSON: every command that prints a result takes
// --json (docs/cli.md gives each shape); proxy and ui serve, and print
// none.
func TestEveryCommandTakesJSON(t *testing.T) {
	t.Parallel()
	servers := map[string]bool{"proxy": true, "ui": true}
	for name := range commands {
		o, _, code := runCLI(name, "--help")
		if takes := strings.Contains(o, "\n  --json\n"); code != exitOK || takes == servers[name] {
			t.Errorf("%s: --json in its flags: %v, want %v", name, takes, !servers[name])
		}
	}
}

// TestMigrateJSON: migrate --json says which version the schema went from
// and to, and that a store without SQL schema has none.
func TestMigrateJSON(t *testing.T) {
	t.Parallel()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	var res migrateResult
	for i, wantFrom := range []int{0, -1} {
		out, errs, code := runCLI("migrate", "--store", dsn, "--json")
		if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || !res.Schema || res.Version == nil || *res.Version < 1 ||
			res.From == nil || res.Store != dsn {
			t.Fatalf("run %d: exit %d, %s%s", i, code, out, errs)
		}
		if wantFrom < 0 {
			wantFrom = *res.Version // the second run finds it up to date
		}
		if *res.From != wantFrom {
			t.Errorf("run %d: from_version %d, want %d", i, *res.From, wantFrom)
		}
	}
	out, _, code := runCLI("migrate", "--store", "memory://", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Schema || res.Version != nil {
		t.Fatalf("memory://: exit %d, %s", code, out)
	}
	if _, e, code := runCLI("migrate", "--store", dsn, "--json", "--print"); code != exitUsage {
		t.Fatalf("--json --print: exit %d, %s", code, e)
	}
}

// TestResolveJSON: resolve --json prints the decision and the decided
// record as idem get --json does; a release has no record.
func TestResolveJSON(t *testing.T) {
	t.Parallel()
	dsn := "sqlite://" + unknownRecords(t)
	out, errs, code := runCLI("resolve", "eng-1", "--store", dsn, "--as", "failed", "--reason", "declined", "--json")
	var res struct {
		Scope, Key, Decision string
		Record               *struct {
			State  string `json:"state"`
			Key    string `json:"key"`
			Fence  int64  `json:"fence"`
			Result string `json:"result"`
		}
	}
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Decision != "failed" || res.Key != "eng-1" ||
		res.Record == nil || res.Record.State != "failed" || res.Record.Key != "eng-1" || res.Record.Fence != 2 || res.Record.Result != "declined" {
		t.Fatalf("exit %d, %s%s", code, out, errs)
	}
	res.Record = nil
	out, errs, code = runCLI("resolve", "http-1", "--store", dsn, "--as", "released", "--reason", "never sent", "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Decision != "released" || res.Key != "http-1" || res.Record != nil ||
		!strings.Contains(out, `"record": null`) {
		t.Fatalf("release: exit %d, %s%s", code, out, errs)
	}
}

// TestSweepJSON: sweep --json counts what it deleted.
func TestSweepJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	past, err := idem.New(st, idem.Config{TTL: time.Hour, Clock: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []idem.Key{"old-1", "old-2"} {
		if _, err := past.DoBytes(ctx, idem.Request{Key: k}, func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	past.Close()
	st.Close()
	out, errs, code := runCLI("sweep", "--store", "sqlite://"+path, "--json")
	var res struct{ Deleted *int }
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Deleted == nil || *res.Deleted != 2 {
		t.Fatalf("exit %d, %s%s", code, out, errs)
	}
}
