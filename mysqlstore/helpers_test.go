package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/mysqlstore"
)

// testTable returns a table name unique to this test run, and drops the
// records and migrations tables when the test ends.
func testTable(t testing.TB, db *sql.DB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "idemt_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tb := range []string{table, table + "_migrations"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+tb+"`"); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	return table
}

// rawDB opens a plain driver pool on the test server.
func rawDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dsn := testenv.MySQL.Need(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

// fixture is a migrated store on its own table.
type fixture struct {
	st    *mysqlstore.Store
	db    *sql.DB // raw pool for inspection
	dsn   string
	table string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db, dsn := rawDB(t)
	table := testTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.Open(ctx, dsn, mysqlstore.Config{Table: table, Migrate: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &fixture{st: st, db: db, dsn: dsn, table: table}
}

// Times the tests use: microsecond precision, as the engine passes them.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func fp(s string) idem.Fingerprint { return idem.NewFingerprint([]byte(s)) }

func claimParams(key, attempt string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{
		Scope:       "tenant-1",
		Key:         key,
		Fingerprint: fp("req:" + key),
		AttemptID:   attempt,
		Intent:      []byte(`{"op":"charge"}`),
		Now:         now,
		LeaseUntil:  now.Add(30 * time.Second),
	}
}

func mustClaim(t testing.TB, st idem.Store, p idem.ClaimParams) idem.ClaimResult {
	t.Helper()
	res, err := st.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim(%q, %q): %v", p.Key, p.AttemptID, err)
	}
	return res
}

func succeed(key, attempt string, fence int64, result string, now time.Time) idem.FinishParams {
	return idem.FinishParams{
		Scope: "tenant-1", Key: key, Fence: fence, AttemptID: attempt,
		State: idem.StateSucceeded, Result: []byte(result),
		CompletedAt: now, ExpiresAt: now.Add(time.Hour),
	}
}

func countRows(t testing.TB, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + table + "`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withParam adds a DSN parameter.
func withParam(dsn, param string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + param
	}
	return dsn + "?" + param
}
