package sqlitestore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestConfigValidationNamesTheField(t *testing.T) {
	cases := []struct {
		path  string
		cfg   Config
		field string
	}{
		{"", Config{}, "path"},
		{":memory:", Config{}, "path"},
		{"file:x.db", Config{}, "path"},
		{"x.db?mode=ro", Config{}, "path"},
		{"x.db", Config{Synchronous: "OFF"}, "Config.Synchronous"},
		{"x.db", Config{Synchronous: "fast"}, "Config.Synchronous"},
		{"x.db", Config{BusyTimeout: -time.Second}, "Config.BusyTimeout"},
		{"x.db", Config{ReadConns: -1}, "Config.ReadConns"},
	}
	for _, c := range cases {
		_, err := Open(context.Background(), c.path, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Open(%q, %+v) = %v, want an error naming %s", c.path, c.cfg, err, c.field)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{path: "x.db", Synchronous: "normal"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Synchronous != "NORMAL" || c.BusyTimeout != DefaultBusyTimeout || c.ReadConns != DefaultReadConns {
		t.Fatalf("defaults = %+v", c)
	}
	if c, _ = (Config{path: "x.db"}).withDefaults(); c.Synchronous != "FULL" {
		t.Fatalf("default synchronous = %q, want FULL", c.Synchronous)
	}
}

// The connections really run with the configured settings.
func TestPragmasApplied(t *testing.T) {
	s := newStore(t)
	var mode string
	var sync, busy int
	if err := s.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := s.readers.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 || busy != 5000 {
		t.Fatalf("journal_mode %q synchronous %d busy_timeout %d; want wal, 2 (FULL), 5000", mode, sync, busy)
	}
	if _, err := s.readers.Exec(`DELETE FROM idem_records`); err == nil {
		t.Fatal("a reader connection accepted a write")
	}
}

func TestClosed(t *testing.T) {
	s := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["claim"] = s.Claim(ctx, claimParams("k", "a"))
	_, errs["finish"] = s.Finish(ctx, idem.FinishParams{Key: "k", State: idem.StateSucceeded})
	errs["release"] = s.Release(ctx, idem.ReleaseParams{Key: "k"})
	errs["heartbeat"] = s.Heartbeat(ctx, idem.HeartbeatParams{Key: "k"})
	_, errs["resolve"] = s.Resolve(ctx, idem.ResolveParams{Key: "k", To: idem.StateFailed})
	errs["setmark"] = s.SetMark(ctx, "", "k", 1, idem.MarkDrift)
	_, errs["get"] = s.Get(ctx, "", "k")
	_, errs["list"] = s.List(ctx, idem.ListFilter{})
	_, errs["sweep"] = s.Sweep(ctx, idem.SweepParams{})
	errs["migrate"] = s.Migrate(ctx)
	for op, err := range errs {
		if !errors.Is(err, idem.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
}

func TestMigrateIsIdempotentAndKeepsThePrimaryKey(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM idem_migrations`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("idem_migrations rows = %d, %v; want 1", n, err)
	}
	// The claim-deciding constraint is really there: a primary-key index
	// on exactly (scope, key).
	var cols []string
	rows, err := s.DB().Query(`SELECT name FROM pragma_index_info(
		(SELECT name FROM pragma_index_list('idem_records') WHERE origin = 'pk')) ORDER BY seqno`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if !equalStrings(cols, []string{"scope", "key"}) {
		t.Fatalf("primary key columns = %v, want [scope key]", cols)
	}
}

func TestMigrationsScriptContents(t *testing.T) {
	sql, err := MigrationsScript(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-- 0001_records.sql", "CREATE TABLE idem_records", "PRIMARY KEY (scope, key)"} {
		if !strings.Contains(sql, want) {
			t.Errorf("MigrationsScript lacks %q", want)
		}
	}
}

func TestOpenWithoutMigrateNeedsSchema(t *testing.T) {
	s, err := Open(context.Background(), tempPath(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Claim(context.Background(), claimParams("k", "a"))
	if !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("claim without schema: %v, want a store error", err)
	}
}
