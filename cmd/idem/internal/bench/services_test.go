package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
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
	var dynalite string // the DSN of the dynamodb case's own dynalite
	cases := map[string]struct {
		dsn  func(t testing.TB) string
		left func(t *testing.T) int
	}{
		"mysql": {
			dsn: mysqlTestURL,
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
		"dynamodb": {
			dsn: func(t testing.TB) string {
				dynalite = "dynamodb://idem-bench?endpoint=" + testenv.StartDynalite(t)
				return dynalite
			},
			left: func(t *testing.T) int {
				d, _ := storeopen.Parse(dynalite)
				c, _, err := storeopen.DynamoClient(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				out, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, name := range out.TableNames {
					if strings.HasPrefix(name, scratchPrefix) {
						n++
					}
				}
				return n
			},
		},
		// The shared server is one node: a bucket of one replica.
		"nats": {
			dsn: func(t testing.TB) string { return strings.TrimSuffix(testenv.NATS.Need(t), "/") + "/x?replicas=1" },
			left: func(t *testing.T) int {
				nc, err := nats.Connect(testenv.NATS.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				names := js.KeyValueStoreNames(ctx)
				for name := range names.Name() {
					if strings.HasPrefix(name, strings.ReplaceAll(scratchPrefix, "_", "-")) {
						n++
					}
				}
				if err := names.Error(); err != nil {
					t.Fatal(err)
				}
				return n
			},
		},
		// A path names database 0, the only one a Cluster has.
		"redis+cluster": {
			dsn: func(t testing.TB) string { return "redis+cluster://" + testenv.RedisCluster.Need(t) + "/0" },
			left: func(t *testing.T) int {
				d, err := storeopen.Parse("redis+cluster://" + testenv.RedisCluster.URL())
				if err != nil {
					t.Fatal(err)
				}
				c, err := storeopen.RedisClient(d)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var mu sync.Mutex
				n := 0
				err = c.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					keys, _, err := m.Scan(ctx, 0, scratchPrefix+"*", 100000).Result()
					mu.Lock()
					n += len(keys)
					mu.Unlock()
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return n
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
			if len(rep.Cells) != 6 || len(rep.Waiters) != 2 || rep.Waiters[0].Replayed != 50 || rep.Waiters[1].Replayed != 50 {
				t.Fatalf("report: %d cells, waiters %+v", len(rep.Cells), rep.Waiters)
			}
			checkMetered(t, name, rep.Cells)
			if rep.Header.Durability == "" || strings.Contains(rep.Header.Durability, "?") {
				t.Errorf("durability not read from the server: %q", rep.Header.Durability)
			}
			if want := "eager (no window), outcomes batched"; name == "postgres" && rep.Header.GroupCommit != want {
				t.Errorf("group commit %q, want the CLI's default %q", rep.Header.GroupCommit, want)
			}
			if n := c.left(t); n != 0 {
				t.Fatalf("%d scratch objects left behind", n)
			}
		})
	}
}

// TestRedisRawClient: the raw baseline's client is configured from the DSN
// as idem's store's client is: every node of a Cluster DSN with a path,
// and go-redis's parameters.
func TestRedisRawClient(t *testing.T) {
	nodes := testenv.RedisCluster.Need(t)
	d, err := storeopen.Parse("redis+cluster://" + nodes + "/0?pool_size=3")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := openRedisTarget(context.Background(), d, scratchName())
	if err != nil {
		t.Fatal(err)
	}
	c := tg.raw.(*redisRaw).c
	t.Cleanup(func() { _ = tg.cleanup(context.Background()) })
	o := c.(*redis.ClusterClient).Options()
	if strings.Join(o.Addrs, ",") != nodes || o.PoolSize != 3 {
		t.Fatalf("raw client: nodes %v, pool size %d; want %s, 3", o.Addrs, o.PoolSize, nodes)
	}
}

// mysqlTestURL returns the test server (IDEM_TEST_MYSQL, a go-sql-driver
// DSN) as the mysql:// DSN the bench takes.
func mysqlTestURL(t testing.TB) string {
	t.Helper()
	dsn, err := storeopen.MySQLURL(testenv.MySQL.Need(t))
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQL.Env, err)
	}
	return dsn
}

// likePrefix is scratchPrefix as a LIKE pattern matching what it starts.
func likePrefix() string { return strings.ReplaceAll(scratchPrefix, "_", `\_`) + "%" }

// TestPrefillFootprintAndSweepUnderLoad: on each store, --prefill loads
// both sides to each size before its cells, the footprint counts what the
// tables hold (PostgreSQL: the run's updates, HOT ones among them), and
// --sweep-under-load sweeps every expired record it loaded; nothing is
// left behind.
func TestPrefillFootprintAndSweepUnderLoad(t *testing.T) {
	ctx := context.Background()
	old := scratchPrefix
	scratchPrefix = fmt.Sprintf("idem_bench_p%d_", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { scratchPrefix = old })
	cases := map[string]func(t testing.TB) string{
		"postgres": testenv.Postgres.Need,
		"mysql":    mysqlTestURL,
		"redis":    testenv.Redis.Need,
		"sqlite":   func(t testing.TB) string { return "sqlite://" + t.TempDir() + "/b.db" },
	}
	for name, dsnOf := range cases {
		t.Run(name, func(t *testing.T) {
			dsn := dsnOf(t)
			rep, err := Run(ctx, Options{Store: dsn, Concurrency: []int{4}, Duration: 30 * time.Millisecond,
				Scenarios: []string{ScenarioFirst, ScenarioReplay}, Prefill: []int64{200, 500}})
			if err != nil {
				t.Fatal(err)
			}
			var first int64
			sizes := map[int64]int{}
			for _, c := range rep.Cells {
				sizes[c.Prefill]++
				if c.Side == sideIdem && c.Scenario == ScenarioFirst {
					first += c.First
				}
				if c.Scenario == ScenarioReplay && c.Side != sideRaw && c.Replays == 0 {
					t.Errorf("%s at %d records replayed nothing", c.Side, c.Prefill)
				}
			}
			if sizes[200] != 6 || sizes[500] != 6 || len(sizes) != 2 {
				t.Fatalf("cells by prefill size: %v, want 6 at 200 and 6 at 500 (raw, idem, idem+cache; first and replay)", sizes)
			}
			if len(rep.Footprints) != 2 {
				t.Fatalf("footprints: %+v", rep.Footprints)
			}
			for _, f := range rep.Footprints {
				if f.Records < 500 || f.Bytes <= 0 || f.BytesPerRecord <= 0 {
					t.Errorf("%s footprint %+v: want at least the 500 prefilled records and their bytes", f.Side, f)
				}
			}
			if name == "postgres" {
				idem := rep.Footprints[1]
				if idem.Side != sideIdem || idem.Updates < first || idem.HOTUpdates > idem.Updates {
					t.Errorf("idem's updates %+v, want at least the %d first-time finishes", idem, first)
				}
			}
			if name == "redis" {
				return // records expire by their keys' TTL; the sweep has nothing to do
			}
			rep, err = Run(ctx, Options{Store: dsn, Duration: 30 * time.Millisecond, SweepUnderLoad: 3000, SweepRate: 1e6})
			if err != nil {
				t.Fatal(err)
			}
			if s := rep.SweepLoad; s == nil || s.Deleted != 3000 || s.Batches != 4 || s.During.Ops == 0 || s.Before.Ops == 0 || s.After.Ops == 0 {
				t.Fatalf("sweep under load: %+v, want 3000 deleted in 4 batches beside first-time requests", rep.SweepLoad)
			}
		})
	}
}

// checkMetered checks the per-request server columns of a services run:
// on PostgreSQL the raw side's statements are counted exactly (an INSERT
// and an UPDATE a first-time request, one SELECT a replay) and its inserts
// write WAL; on a standalone Redis its commands are at least its own (the
// server's other clients add theirs).
func checkMetered(t *testing.T, store string, cells []Cell) {
	t.Helper()
	want := map[string]float64{ScenarioFirst: 2, ScenarioReplay: 1}
	for _, c := range cells {
		if c.Side != sideRaw || c.Error != "" {
			continue
		}
		switch store {
		case "postgres":
			if c.StmtsPerReq == nil || *c.StmtsPerReq != want[c.Scenario] {
				t.Errorf("%s raw: statements a request %v, want %v", c.Scenario, c.StmtsPerReq, want[c.Scenario])
			}
			if c.Scenario == ScenarioFirst && (c.WALPerReq == nil || *c.WALPerReq <= 0) {
				t.Errorf("first raw: WAL a request %v, want > 0", c.WALPerReq)
			}
		case "redis":
			if c.StmtsPerReq == nil || *c.StmtsPerReq < want[c.Scenario] {
				t.Errorf("%s raw: commands a request %v, want at least %v", c.Scenario, c.StmtsPerReq, want[c.Scenario])
			}
			if c.WALPerReq != nil {
				t.Errorf("%s raw: WAL %v on Redis, want n/a", c.Scenario, *c.WALPerReq)
			}
		}
	}
}
