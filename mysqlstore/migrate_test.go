package mysqlstore_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem/mysqlstore"
)

// TestMigrationsScript: an invalid table is an error naming the field, not
// a script; the default and a valid table name the right table.
func TestMigrationsScript(t *testing.T) {
	for _, bad := range []string{"drop table x;", "bad-name", strings.Repeat("t", 60)} {
		if script, err := mysqlstore.MigrationsScript(mysqlstore.Config{Table: bad}); err == nil || script != "" ||
			!strings.Contains(err.Error(), "Config.Table") {
			t.Errorf("MigrationsScript(%q) = %q, %v; want an error naming Config.Table", bad, script, err)
		}
	}
	for table, want := range map[string]string{"": "`idem_records`", "orders_1": "`orders_1`"} {
		script, err := mysqlstore.MigrationsScript(mysqlstore.Config{Table: table})
		if err != nil || !strings.Contains(script, want) || !strings.Contains(script, want[:len(want)-1]+"_migrations`") {
			t.Errorf("MigrationsScript(%q) = %v, lacking %s and its migrations table:\n%s", table, err, want, script)
		}
	}
}
