package storeopen

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A query that url.ParseQuery rejects must not be dropped: Go's parser
// refuses ';' as a separator, and ignoring the error lost schema= (printing
// and migrating "public") or table= (the default table). Port 1 has no
// server: should parsing regress, Open cannot migrate a real database.
func TestMalformedQueryIsAnError(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://127.0.0.1:1/test?schema=bad;name":                "semicolon",
		"postgresql://127.0.0.1:1/test?sslmode=disable&schema=bad;x": "semicolon",
		"postgres://u:s3cret@127.0.0.1:1/test?schema=a%zz":           "invalid URL escape",
		"postgres://127.0.0.1:1/test?password=s3cret;schema=x":       "semicolon",
		"mysql://root@127.0.0.1:1/test?table=bad;name":               "semicolon",
		"mysql://u:s3cret@127.0.0.1:1/test?timeout=5s&table=t%zz":    "invalid URL escape",
		"sqlite://idem.db?sync=full;batch=2ms":                       "semicolon",
		"redis://127.0.0.1:1/0?prefix=a;b":                           "semicolon",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2?prefix=a;b":         "semicolon",
	} {
		_, err := Parse(dsn)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", dsn, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): error shows the password: %v", dsn, err)
		}
		// The open path fails with the same DSN error, before contacting
		// anything (the real migrate used to fail later, at the server).
		if _, oerr := Open(context.Background(), dsn, Options{Migrate: true}); oerr == nil || oerr.Error() != err.Error() {
			t.Errorf("Open(%q) = %v, want %v", dsn, oerr, err)
		}
		if script, merr := MigrationsSQL(dsn); merr == nil || script != "" {
			t.Errorf("MigrationsSQL(%q) = %q, %v; want no script and an error", dsn, script, merr)
		}
	}
}

// A name the store would refuse is a DSN error, not a script that is one
// SQL comment with exit status 0.
func TestInvalidStoreNamesAreErrors(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://127.0.0.1:1/test?schema=" + strings.Repeat("s", 70):  "Config.Schema",
		"mysql://root@127.0.0.1:1/test?table=bad-name":                   "Config.Table",
		"mysql://root@127.0.0.1:1/test?table=" + strings.Repeat("t", 60): "Config.Table",
	} {
		if _, err := Parse(dsn); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", dsn, err, want)
		}
		if script, err := MigrationsSQL(dsn); err == nil || script != "" {
			t.Errorf("MigrationsSQL(%q) = %q, %v; want no script and an error", dsn, script, err)
		}
	}
	// The parameters that are valid reach the script.
	for dsn, want := range map[string]string{
		"postgres://127.0.0.1:1/test?sslmode=disable&schema=" + strings.Repeat("s", 63): `"` + strings.Repeat("s", 63) + `"."idem_records"`,
		"postgres://127.0.0.1:5432/test":                                                `"public"."idem_records"`,
		"mysql://root@127.0.0.1:1/test?table=orders_1":                                  "`orders_1`",
	} {
		script, err := MigrationsSQL(dsn)
		if err != nil || !strings.Contains(script, want) {
			t.Errorf("MigrationsSQL(%q) = %v, lacking %s:\n%s", dsn, err, want, script)
		}
	}
}

func TestStoresWithoutSchema(t *testing.T) {
	t.Parallel()
	for dsn, has := range map[string]bool{
		"memory://":                        false,
		"redis://127.0.0.1:6379/0":         false,
		"rediss://127.0.0.1:6380":          false,
		"redis+cluster://127.0.0.1:7000":   false,
		"sqlite://idem.db":                 true,
		"postgres://127.0.0.1:5432/test":   true,
		"mysql://root@127.0.0.1:3306/test": true,
	} {
		d, err := Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if d.HasSchema() != has {
			t.Errorf("%s: HasSchema() = %v, want %v", dsn, !has, has)
		}
		script, err := MigrationsSQL(dsn)
		if has {
			if err != nil || script == "" {
				t.Errorf("MigrationsSQL(%q) = %q, %v", dsn, script, err)
			}
			continue
		}
		if !errors.Is(err, ErrNoSchema) || script != "" {
			t.Errorf("MigrationsSQL(%q) = %q, %v; want ErrNoSchema", dsn, script, err)
		}
	}
}
