package sqlitestore

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/idemkit/idem"
)

// TestFilesArePrivate: the database, its WAL and its shared-memory file are
// created readable by their owner only, whatever the umask lets through.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the common default, which gives 0644
	defer syscall.Umask(old)
	path := tempPath(t)
	s := openAt(t, path)
	if _, err := s.Claim(context.Background(), claimParams("k", "a1")); err != nil {
		t.Fatal(err) // a write, so the WAL and shm files exist
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if m := fi.Mode().Perm(); m != FileMode {
			t.Errorf("%s has mode %v, want %v", p, m, FileMode)
		}
	}
}

// TestFileModeKeptWhenPresent: a database file that already exists keeps
// the permissions its operator gave it.
func TestFileModeKeptWhenPresent(t *testing.T) {
	path := tempPath(t)
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	openAt(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o640 {
		t.Fatalf("mode %v, want 0640 kept", m)
	}
}

// TestCheckDurability: FULL is clean, NORMAL a warning, and OFF, set on the
// writer's connection behind the store's back, a refusal of New.
func TestCheckDurability(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if fs, err := s.CheckDurability(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("FULL: %+v, %v; want no finding", fs, err)
	}
	n, err := Open(ctx, tempPath(t), Config{Migrate: true, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if fs, err := n.CheckDurability(ctx); err != nil || len(fs) != 1 || fs[0].Severity != idem.SeverityWarning {
		t.Fatalf("NORMAL: %+v, %v; want one warning", fs, err)
	}
	if _, err := s.DB().ExecContext(ctx, "PRAGMA synchronous = OFF"); err != nil {
		t.Fatal(err) // the writer pool's one connection
	}
	_, err = idem.New(s, idem.Config{})
	var verr *idem.VolatileStoreError
	if !errors.Is(err, idem.ErrVolatileStore) || !errors.As(err, &verr) || verr.Findings[0].Setting != "synchronous" {
		t.Fatalf("New with synchronous OFF = %v, want a refusal naming synchronous", err)
	}
}

// TestCheckSchema: a migrated store is at the latest version with its
// unique constraint; one without the primary key is found out.
func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	v, fs, err := newStore(t).CheckSchema(ctx)
	if err != nil || v != 1 || len(fs) != 0 {
		t.Fatalf("migrated: version %d, %+v, %v; want 1, none", v, fs, err)
	}
	_, fs, err = openBroken(t).CheckSchema(ctx)
	if err != nil || len(fs) != 1 || fs[0].Setting != "unique constraint (scope, key)" {
		t.Fatalf("without the primary key: %+v, %v; want the unique constraint found missing", fs, err)
	}
	bare, err := Open(ctx, tempPath(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	v, fs, err = bare.CheckSchema(ctx)
	if err != nil || v != 0 || len(fs) != 1 || fs[0].Value != "absent" {
		t.Fatalf("unmigrated: version %d, %+v, %v; want the table found absent", v, fs, err)
	}
}
