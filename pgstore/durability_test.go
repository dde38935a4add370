package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// TestCheckDurability: the test server (fsync on) is clean; a session with
// synchronous_commit off is a warning, and New still starts.
func TestCheckDurability(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, pgstore.Config{})
	if fs, err := s.CheckDurability(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("healthy server: %+v, %v; want no finding", fs, err)
	}
	cfg, err := pgxpool.ParseConfig(testenv.Postgres.Need(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	async, err := pgstore.New(ctx, pool, pgstore.Config{Schema: s.Schema(), DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer async.Close()
	wantOneWarning(t, async, "synchronous_commit")
}

// wantOneWarning checks that s's CheckDurability finds one warning, on
// setting, and that the engine still starts on s.
func wantOneWarning(t *testing.T, s *pgstore.Store, setting string) {
	t.Helper()
	fs, err := s.CheckDurability(context.Background())
	if err != nil || len(fs) != 1 || fs[0].Setting != setting || fs[0].Severity != idem.SeverityWarning {
		t.Fatalf("CheckDurability: %+v, %v; want one warning naming %s", fs, err, setting)
	}
	e, err := idem.New(s, idem.Config{})
	if err != nil {
		t.Fatalf("New with a warning on %s: %v", setting, err)
	}
	e.Close()
}

// TestCheckDurabilityNamesAsyncOutcomes: a store with AsyncOutcomes says
// so, as a warning (idem doctor names it; the engine still starts).
func TestCheckDurabilityNamesAsyncOutcomes(t *testing.T) {
	wantOneWarning(t, newStore(t, pgstore.Config{AsyncOutcomes: true}), "async_outcomes")
}

// TestFsyncOffRefuses: fsync off is a refusal (judged on the values: a
// shared test server cannot run with it).
func TestFsyncOffRefuses(t *testing.T) {
	fs := pgstore.DurabilityFindings("off", "on", "on")
	if len(fs) != 1 || fs[0].Setting != "fsync" || fs[0].Severity != idem.SeverityRefuse {
		t.Fatalf("fsync off: %+v, want one refusal", fs)
	}
	if fs := pgstore.DurabilityFindings("on", "on", "off"); len(fs) != 1 || fs[0].Severity != idem.SeverityWarning {
		t.Fatalf("full_page_writes off: %+v, want one warning", fs)
	}
}

// TestCheckSchema: a migrated schema is at the latest version with its
// primary key; without it, the missing constraint is found.
func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, pgstore.Config{})
	v, fs, err := s.CheckSchema(ctx)
	if err != nil || v != 4 || len(fs) != 0 {
		t.Fatalf("migrated: version %d, %+v, %v; want 4 (the latest) and none", v, fs, err)
	}
	tbl := pgx.Identifier{s.Schema(), s.Config().Table}.Sanitize()
	pkey := pgx.Identifier{s.Config().Table + "_pkey"}.Sanitize()
	if _, err := sharedPool().Exec(ctx, "ALTER TABLE "+tbl+" DROP CONSTRAINT "+pkey); err != nil {
		t.Fatal(err)
	}
	_, fs, err = s.CheckSchema(ctx)
	if err != nil || len(fs) != 1 || fs[0].Setting != "unique constraint (scope, key)" || fs[0].Severity != idem.SeverityRefuse {
		t.Fatalf("without the primary key: %+v, %v; want the constraint found missing", fs, err)
	}
	bare, err := pgstore.New(ctx, sharedPool(), pgstore.Config{Schema: freshSchema(t, sharedPool()), DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if v, fs, err := bare.CheckSchema(ctx); err != nil || v != 0 || len(fs) != 1 || fs[0].Value != "absent" {
		t.Fatalf("unmigrated: %d, %+v, %v; want the table found absent", v, fs, err)
	}
	if _, err := bare.CheckDurability(ctx); errors.Is(err, idem.ErrClosed) {
		t.Fatal(err)
	}
}
