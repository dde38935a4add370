// Package mysqltest gives tests an isolated MariaDB/MySQL table.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver the tables are dropped with

	"github.com/idemkit/idem/internal/testenv"
)

// Table returns the test server's go-sql-driver DSN (IDEM_TEST_MYSQL) and
// the name of a fresh table; the table and its migrations table
// (<table>_migrations) are dropped when t ends. It skips (or fails under
// IDEM_REQUIRE_SERVICES=1) when the server is unreachable. mysqlstore
// creates both tables on Migrate.
func Table(t testing.TB) (driverDSN, table string) {
	t.Helper()
	driverDSN = testenv.MySQL.Need(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	table = "idemt_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		db, err := sql.Open("mysql", driverDSN)
		if err != nil {
			t.Errorf("mysqltest: drop table %s: %v", table, err)
			return
		}
		defer db.Close()
		for _, tb := range []string{table, table + "_migrations"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+tb+"`"); err != nil {
				t.Errorf("mysqltest: drop table %s: %v", tb, err)
			}
		}
	})
	return driverDSN, table
}

// URL returns a mysql:// DSN for the idem CLI with a fresh table (the table
// query parameter), dropped when t ends as by Table. toURL turns the
// go-sql-driver DSN into a mysql:// one: storeopen.MySQLURL, which this
// package cannot import, for storeopen's own tests import it.
func URL(t testing.TB, toURL func(driverDSN string) (string, error)) string {
	t.Helper()
	driverDSN, table := Table(t)
	dsn, err := toURL(driverDSN)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQL.Env, err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "table=" + table
}
