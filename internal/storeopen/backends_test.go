package storeopen

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
)

func randName(t *testing.T) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "idemdsn_" + hex.EncodeToString(b[:])
}

func TestMySQLDriverDSN(t *testing.T) {
	for in, want := range map[string]string{
		"mysql://root@127.0.0.1:3306/test":                  "root@tcp(127.0.0.1:3306)/test",
		"mysql://u:p%40ss@db.local/app?table=t1&timeout=5s": "u:p@ss@tcp(db.local:3306)/app?timeout=5s",
		"mysql://127.0.0.1/test?tls=skip-verify":            "tcp(127.0.0.1:3306)/test?tls=skip-verify",
	} {
		d, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		got, _, err := mysqlDriverDSN(d)
		if err != nil || got != want {
			t.Errorf("%s → %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"mysql://", "mysql://host", "mysql://host/a/b"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRedisOptions(t *testing.T) {
	d, err := Parse("redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001,10.0.0.3:7002?prefix=pay&pool_size=7")
	if err != nil {
		t.Fatal(err)
	}
	o, err := redisOptions(d)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cluster; c == nil || o.node != nil || len(c.Addrs) != 3 || c.Addrs[2] != "10.0.0.3:7002" ||
		c.Password != "pw" || c.PoolSize != 7 || o.prefix != "pay" {
		t.Fatalf("cluster options = %+v", o)
	}
	// go-redis's own parameters reach the client; idem's prefix does not.
	d, _ = Parse("redis://127.0.0.1:6379/3?pool_size=9&read_timeout=2s&prefix=p")
	o, err = redisOptions(d)
	if err != nil || o.cluster != nil || o.node == nil || o.node.DB != 3 || o.node.PoolSize != 9 ||
		o.node.ReadTimeout != 2*time.Second || o.prefix != "p" {
		t.Fatalf("standalone options = %+v, %v", o, err)
	}
	if _, err := Parse("redis+cluster://a:1,,b:2"); err == nil {
		t.Fatal("empty cluster host accepted")
	}
	d, _ = Parse("redis://127.0.0.1:6379/0?pool_size=many")
	if _, err := redisOptions(d); err == nil {
		t.Fatal("a pool_size that is not a number was accepted")
	}
}

// TestOpenServiceBackends opens each service-backed store through its DSN,
// as the CLI does, and runs one intent and its replay.
func TestOpenServiceBackends(t *testing.T) {
	cases := map[string]func(t *testing.T) string{
		"postgres": func(t *testing.T) string { return pgtest.DSN(t) },
		"redis": func(t *testing.T) string {
			return strings.TrimSuffix(testenv.Redis.Need(t), "/") + "?prefix=" + randName(t)
		},
		"redis+cluster": func(t *testing.T) string {
			return "redis+cluster://" + testenv.RedisCluster.Need(t) + "?prefix=" + randName(t)
		},
		"mysql": func(t *testing.T) string {
			testenv.MySQL.Need(t)
			table := randName(t)
			t.Cleanup(func() {
				db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/test")
				if err != nil {
					t.Error(err)
					return
				}
				defer db.Close()
				for _, tb := range []string{table, table + "_migrations"} {
					if _, err := db.Exec("DROP TABLE IF EXISTS `" + tb + "`"); err != nil {
						t.Error(err)
					}
				}
			})
			return "mysql://root@127.0.0.1:3306/test?table=" + table
		},
	}
	for name, dsn := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := Open(ctx, dsn(t), Options{Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			e, err := idem.New(st, idem.Config{})
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			for i := 0; i < 2; i++ {
				r, err := e.DoBytes(ctx, idem.Request{Key: "dsn:v1:k"}, func(context.Context, *idem.Attempt) ([]byte, error) {
					runs++
					return []byte("v"), nil
				})
				if err != nil || string(r.Value) != "v" || r.Replayed != (i == 1) {
					t.Fatalf("call %d = %+v, %v", i, r, err)
				}
			}
			if runs != 1 {
				t.Fatalf("effect ran %d times", runs)
			}
			if name == "mysql" {
				// Leave no table behind.
				if sqlText, err := MigrationsSQL("mysql://root@127.0.0.1:3306/test?table=x"); err != nil || !strings.Contains(sqlText, "`x`") {
					t.Fatalf("migrations = %v", err)
				}
			}
		})
	}
}
