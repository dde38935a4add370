package mysqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
)

// TestCheckDurability: the test server (innodb_flush_log_at_trx_commit 1)
// is clean; 0 and 2 are warnings.
func TestCheckDurability(t *testing.T) {
	f := newFixture(t)
	if fs, err := f.st.CheckDurability(context.Background()); err != nil || len(fs) != 0 {
		t.Fatalf("healthy server: %+v, %v; want no finding", fs, err)
	}
	for _, v := range []string{"0", "2"} {
		fs := mysqlstore.DurabilityFindings(v)
		if len(fs) != 1 || fs[0].Setting != "innodb_flush_log_at_trx_commit" || fs[0].Severity != idem.SeverityWarning {
			t.Errorf("flush %s: %+v, want one warning", v, fs)
		}
	}
}

// TestStoreTime: NOW(6) read as UTC, whatever the session's time zone.
func TestStoreTime(t *testing.T) {
	f := newFixture(t)
	sep := "?"
	if strings.Contains(f.dsn, "?") {
		sep = "&"
	}
	// A session five hours east of UTC.
	st, err := mysqlstore.Open(context.Background(), f.dsn+sep+"time_zone=%27%2B05%3A00%27", mysqlstore.Config{Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.StoreTime(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got); d.Abs() > time.Minute {
		t.Fatalf("NOW(6) %s is %s off this host's clock", got, d)
	}
}

// TestCheckSchema: a migrated table is at the latest version with its
// primary key; without it, the missing constraint is found.
func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	v, fs, err := f.st.CheckSchema(ctx)
	if err != nil || v != 1 || len(fs) != 0 {
		t.Fatalf("migrated: version %d, %+v, %v; want 1 and none", v, fs, err)
	}
	if _, err := f.db.ExecContext(ctx, "ALTER TABLE `"+f.table+"` DROP PRIMARY KEY"); err != nil {
		t.Fatal(err)
	}
	_, fs, err = f.st.CheckSchema(ctx)
	if err != nil || len(fs) != 1 || fs[0].Setting != "unique constraint (scope, key)" {
		t.Fatalf("without the primary key: %+v, %v; want the constraint found missing", fs, err)
	}
}
