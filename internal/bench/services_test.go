package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/testenv"
)

// TestRunServices runs a short bench on each service and checks that it
// left nothing behind: no scratch table, schema or key.
func TestRunServices(t *testing.T) {
	ctx := context.Background()
	// Scratch objects of this run only: other bench runs may share the servers.
	old := scratchPrefix
	scratchPrefix = fmt.Sprintf("idem_bench_t%d_", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { scratchPrefix = old })
	cases := map[string]struct {
		dsn  func(t testing.TB) string
		left func(t *testing.T) int
	}{
		"mysql": {
			dsn: func(t testing.TB) string { testenv.MySQL.Need(t); return "mysql://root@127.0.0.1:3306/test" },
			left: func(t *testing.T) int {
				db, err := sql.Open("mysql", testenv.MySQL.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var n int
				if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE ?`, likePrefix()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
		},
		"postgres": {
			dsn: testenv.Postgres.Need,
			left: func(t *testing.T) int {
				c, err := pgx.Connect(ctx, testenv.Postgres.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(ctx)
				var n int
				if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM pg_namespace WHERE nspname LIKE $1`, likePrefix()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
		},
		"redis": {
			dsn: testenv.Redis.Need,
			left: func(t *testing.T) int {
				o, _ := redis.ParseURL(testenv.Redis.URL())
				c := redis.NewClient(o)
				defer c.Close()
				keys, _, err := c.Scan(ctx, 0, scratchPrefix+"*", 100000).Result()
				if err != nil {
					t.Fatal(err)
				}
				return len(keys)
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dsn := c.dsn(t)
			rep, err := Run(ctx, Options{Store: dsn, Concurrency: []int{4}, Duration: 30 * time.Millisecond,
				Scenarios: []string{ScenarioFirst, ScenarioReplay, ScenarioWaiters}, Waiters: 50, Hold: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Cells) != 5 || len(rep.Waiters) != 2 || rep.Waiters[0].Replayed != 50 || rep.Waiters[1].Replayed != 50 {
				t.Fatalf("report: %d cells, waiters %+v", len(rep.Cells), rep.Waiters)
			}
			if rep.Header.Durability == "" || strings.Contains(rep.Header.Durability, "?") {
				t.Errorf("durability not read from the server: %q", rep.Header.Durability)
			}
			if n := c.left(t); n != 0 {
				t.Fatalf("%d scratch objects left behind", n)
			}
		})
	}
}

// likePrefix is scratchPrefix as a LIKE pattern matching what it starts.
func likePrefix() string { return strings.ReplaceAll(scratchPrefix, "_", `\_`) + "%" }
