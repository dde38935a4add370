package storeopen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
)

// MySQL/MariaDB DSN: mysql://user[:pass]@host[:port]/db[?table=idem_records&param=value…]
// The table parameter names the records table (default idem_records); other
// parameters go to go-sql-driver/mysql.
//
// The store it opens is an idem.ReplicationChecker (mysqlstore's
// CheckReplication): the engine refuses a replica or read-only server,
// asynchronous replicas, semi-synchronous replication that fell back or
// waits AFTER_COMMIT, and a Galera node outside the Primary component,
// unless told to allow asynchronous replication. Parameters that change
// what the store's sessions replicate (sql_log_bin=0, wsrep_on=0) are
// refused by the same check.

// checkMySQL validates the DSN's shape and its table parameter (as
// mysqlstore validates it), without contacting the server.
func checkMySQL(d DSN) error {
	_, table, err := mysqlDriverDSN(d)
	if err != nil {
		return err
	}
	if _, err := mysqlstore.MigrationsScript(mysqlstore.Config{Table: table}); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// mysqlDriverDSN turns the URL form into go-sql-driver's user:pass@tcp(host:port)/db?params.
func mysqlDriverDSN(d DSN) (dsn, table string, err error) {
	u, err := url.Parse(d.Raw)
	if err != nil {
		return "", "", fmt.Errorf("not a URL: %v", redactErr(err))
	}
	if u.Host == "" {
		return "", "", errors.New("no host; write mysql://root@127.0.0.1:3306/test")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", "", errors.New("name one database: mysql://user@host:3306/DB")
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	// Not u.Query(), which drops what it cannot parse: a "table=a;b" would
	// silently become the default table.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", fmt.Errorf("query: %w", err)
	}
	table = q.Get("table")
	q.Del("table")
	var b strings.Builder
	if u.User != nil {
		b.WriteString(u.User.Username())
		if p, ok := u.User.Password(); ok {
			b.WriteString(":" + p)
		}
		b.WriteString("@")
	}
	b.WriteString("tcp(" + host + ")/" + db)
	if len(q) > 0 {
		b.WriteString("?" + q.Encode())
	}
	return b.String(), table, nil
}

// MySQLURL turns a go-sql-driver DSN (user:pass@tcp(host:port)/db?params,
// as mysqlstore and the tests' IDEM_TEST_MYSQL take it) into the mysql://
// form that [Open] takes: the inverse of what Open does with a mysql://
// DSN. The driver's parameters are kept; the network must be tcp.
func MySQLURL(driverDSN string) (string, error) {
	cfg, err := mysql.ParseDSN(driverDSN)
	if err != nil {
		return "", fmt.Errorf("storeopen: driver DSN: %w", err)
	}
	if cfg.Net != "tcp" {
		return "", fmt.Errorf("storeopen: driver DSN: network %q; a mysql:// DSN names a TCP host", cfg.Net)
	}
	if cfg.DBName == "" {
		return "", errors.New("storeopen: driver DSN names no database")
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	switch {
	case cfg.Passwd != "":
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	case cfg.User != "":
		u.User = url.User(cfg.User)
	}
	// The parameters as the driver writes them, without the parts a '?'
	// in a password or database name could be confused with.
	params := cfg.Clone()
	params.User, params.Passwd, params.DBName = "", "", ""
	if _, q, ok := strings.Cut(params.FormatDSN(), "?"); ok {
		u.RawQuery = q
	}
	return u.String(), nil
}

// redactErr drops a url.Error's URL, which may carry a password.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func openMySQL(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	dsn, table, err := mysqlDriverDSN(d)
	if err != nil {
		return nil, err
	}
	return mysqlstore.Open(ctx, dsn, mysqlstore.Config{Table: table, Migrate: opt.Migrate})
}

func mysqlMigrations(d DSN) (string, error) {
	_, table, err := mysqlDriverDSN(d)
	if err != nil {
		return "", err
	}
	return mysqlstore.MigrationsScript(mysqlstore.Config{Table: table})
}
