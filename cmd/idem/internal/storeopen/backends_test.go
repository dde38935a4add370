package storeopen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/redisstore"
)

// withParam returns the URL-shaped dsn with the query parameter set.
func withParam(dsn, key, value string) string {
	base, q, _ := strings.Cut(dsn, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		panic(err)
	}
	vals.Set(key, value)
	return base + "?" + vals.Encode()
}

func randName(t *testing.T) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "idemdsn_" + hex.EncodeToString(b[:])
}

// parseRedis returns the redis options of the DSN in; a failure to parse
// it or to make its options is an error on t, and ok false.
func parseRedis(t *testing.T, in string) (o redisOpts, ok bool) {
	t.Helper()
	d, err := Parse(in)
	if err != nil {
		t.Errorf("Parse(%q): %v", in, err)
		return o, false
	}
	if o, err = redisOptions(d); err != nil {
		t.Errorf("redisOptions(%q): %v", in, err)
		return o, false
	}
	return o, true
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
		c.Password != "pw" || c.PoolSize != 7 || o.cfg.Prefix != "pay" || o.cfg.Wait != nil {
		t.Fatalf("cluster options = %+v", o)
	}
	// go-redis's own parameters reach the client; idem's prefix does not.
	d, _ = Parse("redis://127.0.0.1:6379/3?pool_size=9&read_timeout=2s&prefix=p")
	o, err = redisOptions(d)
	if err != nil || o.cluster != nil || o.node == nil || o.node.DB != 3 || o.node.PoolSize != 9 ||
		o.node.ReadTimeout != 2*time.Second || o.cfg.Prefix != "p" {
		t.Fatalf("standalone options = %+v, %v", o, err)
	}
	if _, err := Parse("redis+cluster://a:1,,b:2"); err == nil {
		t.Fatal("empty cluster host accepted")
	}
	// pipeline=off is redisstore.Config.Unpipelined; on, or absent, the
	// default (pipelined); anything else an error.
	for in, want := range map[string]bool{"redis://h/0": false, "redis://h/0?pipeline=on": false, "redis://h/0?pipeline=off": true} {
		if o, ok := parseRedis(t, in); ok && o.cfg.Unpipelined != want {
			t.Errorf("%s: Unpipelined = %v, want %v", in, o.cfg.Unpipelined, want)
		}
	}
	if _, err := Parse("redis://h/0?pipeline=0"); err == nil || !strings.Contains(err.Error(), "pipeline") {
		t.Fatalf("pipeline=0: %v, want an error naming pipeline", err)
	}
	d, _ = Parse("redis://127.0.0.1:6379/0?pool_size=many")
	if _, err := redisOptions(d); err == nil {
		t.Fatal("a pool_size that is not a number was accepted")
	}
}

// TestRedisClusterPath: a Cluster has only database 0, so its DSN's path is
// empty, "/" or "/0"; any other path is an error, and the path never
// reaches a node's address.
func TestRedisClusterPath(t *testing.T) {
	t.Parallel()
	good := map[string][]string{
		"redis+cluster://127.0.0.1:7350":                         {"127.0.0.1:7350"},
		"redis+cluster://127.0.0.1:7350/":                        {"127.0.0.1:7350"},
		"redis+cluster://127.0.0.1:7350/0":                       {"127.0.0.1:7350"},
		"REDIS+CLUSTER://127.0.0.1:7350/0?prefix=p":              {"127.0.0.1:7350"},
		"redis+cluster://u:pw@127.0.0.1:7350,127.0.0.1:7351/0":   {"127.0.0.1:7350", "127.0.0.1:7351"},
		"redis+cluster://h1:700,h2:701/0?pool_size=3":            {"h1:700", "h2:701"},
		"redis+cluster://[::1]:7000,h2?dial_timeout=1s":          {"[::1]:7000", "h2:6379"},
		"redis+cluster://h1:7000,h2:7001/?addr=h3%3A7002&prefix": {"h1:7000", "h2:7001", "h3:7002"},
	}
	for in, want := range good {
		o, ok := parseRedis(t, in)
		if ok && (o.cluster == nil || !slices.Equal(o.cluster.Addrs, want)) {
			t.Errorf("%s: options %+v; want cluster nodes %v", in, o, want)
		}
	}
	for in, want := range map[string]string{
		"redis+cluster://127.0.0.1:7350/1":        "only database 0",
		"redis+cluster://127.0.0.1:7350/0/x":      "only database 0",
		"redis+cluster://a:7000,b:7001/db?x=1":    "only database 0",
		"redis+cluster://127.0.0.1:7350//0":       "only database 0",
		"redis+cluster://127.0.0.1:73500":         "port",
		"redis+cluster://a:7000,b:x":              "port",
		"redis+cluster://a:7000,b:":               "port",
		"redis+cluster://a:7000,:7001":            "not host:port",
		"redis+cluster://a:7000,b c:7001":         "not host:port",
		"redis+cluster://a:7000,,b:7001":          "empty host",
		"redis+cluster://u:pw@a:7000/9?prefix=pw": "only database 0",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %s", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("Parse(%q) error %v shows the password", in, err)
		}
	}
}

// TestRedisClient: the client storeopen hands out (idem bench's raw side)
// is configured from the DSN as the store's is.
func TestRedisClient(t *testing.T) {
	t.Parallel()
	d, err := Parse("redis+cluster://u:pw@h1:7000,h2:7001/0?pool_size=5&prefix=p&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := RedisClient(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if o := cc.Options(); !ok || !slices.Equal(o.Addrs, []string{"h1:7000", "h2:7001"}) || o.PoolSize != 5 || o.Password != "pw" {
		t.Fatalf("cluster client options %+v", o)
	}
	d, _ = Parse("redis://h:6380/2?pool_size=4&wait_timeout=1s&wait_aof_local=1")
	c, err = RedisClient(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.(*redis.Client).Options(); o.Addr != "h:6380" || o.DB != 2 || o.PoolSize != 4 {
		t.Fatalf("client options %+v", o)
	}
	if _, err := RedisClient(DSN{Scheme: "postgres", Raw: "postgres://h/db"}); err == nil {
		t.Fatal("RedisClient accepted a postgres DSN")
	}
}

// TestRedisWaitParams: the wait_* parameters become redisstore.Config.Wait
// and never reach go-redis, which rejects parameters it does not know.
func TestRedisWaitParams(t *testing.T) {
	t.Parallel()
	good := map[string]*redisstore.WaitConfig{
		"redis://h:6379/0": nil,
		"redis://h:6379/0?wait_replicas=0&pool_size=2":         nil,
		"redis://h:6379/0?wait_replicas=2":                     {Replicas: 2},
		"redis://h:6379/0?wait_aof_local=1&wait_timeout=250ms": {AOFLocal: 1, Timeout: 250 * time.Millisecond},
		"rediss://h:6379?wait_aof_replicas=1&wait_aof_local=0": {AOFReplicas: 1},
		"redis+cluster://a:1,b:2/0?wait_replicas=1&wait_aof_replicas=1&wait_timeout=2s&read_timeout=1s": {
			Replicas: 1, AOFReplicas: 1, Timeout: 2 * time.Second},
	}
	for in, want := range good {
		o, ok := parseRedis(t, in)
		if !ok {
			continue
		}
		if (o.cfg.Wait == nil) != (want == nil) || (want != nil && *o.cfg.Wait != *want) {
			t.Errorf("%s: Wait = %+v, want %+v", in, o.cfg.Wait, want)
		}
	}
	for in, want := range map[string]string{
		"redis://h/0?wait_replicas=-1":                  "wait_replicas",
		"redis://h/0?wait_replicas=two":                 "wait_replicas",
		"redis://h/0?wait_aof_local=2":                  "0 or 1",
		"redis://h/0?wait_aof_replicas=x":               "wait_aof_replicas",
		"redis://h/0?wait_replicas=1&wait_timeout=0":    "positive duration",
		"redis://h/0?wait_replicas=1&wait_timeout=soon": "positive duration",
		"redis://h/0?wait_timeout=1s":                   "nothing to wait for",
		"redis+cluster://a:1?wait_aof_local=yes":        "0 or 1",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", in, err, want)
		}
	}
}

// TestPostgresNotifyParam: notify=false in the DSN switches LISTEN/NOTIFY
// off (for CockroachDB and YugabyteDB) and never reaches pgx.
func TestPostgresNotifyParam(t *testing.T) {
	t.Parallel()
	for in, disabled := range map[string]bool{
		"postgres://u@h/db":                           false,
		"postgres://u@h/db?notify=true":               false,
		"postgres://u@h/db?notify=on&sslmode=disable": false,
		"postgres://u@h/db?notify=false":              true,
		"postgres://u@h/db?sslmode=disable&notify=0":  true,
		"postgresql://u@h/db?notify=OFF&schema=s":     true,
		"postgres://u@h/db?notify=No":                 true,
	} {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		dsn, cfg, err := parsePostgres(in)
		if err != nil || cfg.DisableNotify != disabled || strings.Contains(dsn, "notify") {
			t.Errorf("%s: pgx DSN %q, DisableNotify %v, %v; want %v", in, dsn, cfg.DisableNotify, err, disabled)
		}
	}
	for _, in := range []string{"postgres://u@h/db?notify=", "postgres://u@h/db?notify=maybe", "postgres://u@h/db?notify=2"} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), "notify") {
			t.Errorf("Parse(%q) = %v, want an error naming notify", in, err)
		}
	}
}

// TestMySQLURL: the tests' go-sql-driver DSN (IDEM_TEST_MYSQL) becomes a
// mysql:// DSN that Open turns back into the same driver DSN.
func TestMySQLURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"root@tcp(127.0.0.1:3306)/test":                         "mysql://root@127.0.0.1:3306/test",
		"app:p@ss?w/rd@tcp(db.local:3307)/app?timeout=5s":       "mysql://app:p%40ss%3Fw%2Frd@db.local:3307/app?timeout=5s",
		"tcp(10.0.0.1)/x?parseTime=true&interpolateParams=true": "mysql://10.0.0.1:3306/x?",
	} {
		got, err := MySQLURL(in)
		if err != nil || !strings.HasPrefix(got, want) {
			t.Errorf("MySQLURL(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		d, err := Parse(got)
		if err != nil {
			t.Errorf("Parse(%q): %v", got, err)
			continue
		}
		back, _, err := mysqlDriverDSN(d)
		if err != nil {
			t.Fatal(err)
		}
		c1, err1 := mysql.ParseDSN(in)
		c2, err2 := mysql.ParseDSN(back)
		if err1 != nil || err2 != nil || c1.FormatDSN() != c2.FormatDSN() {
			t.Errorf("%s → %s → %s: %v, %v", in, got, back, err1, err2)
		}
	}
	for _, bad := range []string{"root@unix(/tmp/mysql.sock)/test", "root@tcp(h:3306)/", "not a dsn"} {
		if got, err := MySQLURL(bad); err == nil {
			t.Errorf("MySQLURL(%q) = %q, want an error", bad, got)
		}
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
		// One seed node and a path naming database 0, the only one a
		// Cluster has: the path must not reach the node's address.
		"redis+cluster/0": func(t *testing.T) string {
			first, _, _ := strings.Cut(testenv.RedisCluster.Need(t), ",")
			return "redis+cluster://" + first + "/0?prefix=" + randName(t)
		},
		"mysql": func(t *testing.T) string { return mysqltest.URL(t, MySQLURL) },
	}
	for name, dsn := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := dsn(t)
			st, err := Open(ctx, dsn, Options{Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			e, err := idem.New(st, idem.Config{AllowVolatileStore: true}) // test servers may run without persistence
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
				// The table parameter reaches the printed script.
				if sqlText, err := MigrationsSQL(withParam(dsn, "table", "x")); err != nil || !strings.Contains(sqlText, "`x`") {
					t.Fatalf("migrations = %v", err)
				}
			}
		})
	}
}

// TestOpenPostgresNotifyOff: a postgres DSN with notify=false opens a store
// without LISTEN/NOTIFY, as CockroachDB and YugabyteDB need.
func TestOpenPostgresNotifyOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, withParam(pgtest.DSN(t), "notify", "false"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps, ok := st.(*pgstore.Store)
	if !ok || !ps.Config().DisableNotify {
		t.Fatalf("store %T, config %+v; want DisableNotify", st, ps.Config())
	}
	if _, _, err := ps.Subscribe(ctx, "", "k"); !errors.Is(err, pgstore.ErrNotifyDisabled) {
		t.Fatalf("Subscribe = %v, want ErrNotifyDisabled", err)
	}
}

// TestOpenPostgresReplicatedClaims: a postgres DSN with replicated_claims
// opens a store whose claims wait for the standbys (on the test server,
// which has none, they do not wait) and whose replication the engine can
// check through the CLI's store.
func TestOpenPostgresReplicatedClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := withParam(withParam(pgtest.DSN(t), "replicated_claims", "remote_apply"), "replicated_claims_timeout", "2s")
	st, err := Open(ctx, dsn, Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps, ok := st.(*pgstore.Store)
	if !ok || ps.Config().ReplicatedClaims != "remote_apply" || ps.Config().ReplicatedClaimTimeout != 2*time.Second {
		t.Fatalf("store %T, config %+v; want ReplicatedClaims remote_apply, 2s", st, ps.Config())
	}
	if _, ok := st.(idem.ReplicationChecker); !ok {
		t.Fatalf("%T does not check its replication", st)
	}
	rep, err := st.(idem.ReplicationChecker).CheckReplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("test server: %s %v", rep.Topology, rep.Findings)
	now := time.Now()
	res, err := st.Claim(ctx, idem.ClaimParams{Scope: "s", Key: "k", AttemptID: "a", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || !res.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
}

// TestOpenRedisWait: a redis DSN's wait_* parameters reach the store: with
// more replicas asked for than the test server has, a claim is not
// confirmed and its effect does not run.
func TestOpenRedisWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := strings.TrimSuffix(testenv.Redis.Need(t), "/") + "?prefix=" + randName(t) + "&wait_replicas=100&wait_timeout=20ms"
	st, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := idem.New(st, idem.Config{AllowVolatileStore: true}) // test servers may run without persistence
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.DoBytes(ctx, idem.Request{Key: "dsn:v1:wait"}, func(context.Context, *idem.Attempt) ([]byte, error) {
		t.Error("the effect ran on a claim WAIT did not confirm")
		return nil, nil
	})
	if !errors.Is(err, redisstore.ErrNotDurable) {
		t.Fatalf("DoBytes = %v, want ErrNotDurable", err)
	}
}

// TestPostgresReplicatedClaims: replicated_claims and its timeout reach
// pgstore.Config and never pgx; bad values are errors naming them.
func TestPostgresReplicatedClaims(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]pgstore.Config{
		"postgres://u@h/db":                                                           {},
		"postgres://u@h/db?replicated_claims=off":                                     {},
		"postgres://u@h/db?replicated_claims=on":                                      {ReplicatedClaims: "on"},
		"postgres://u@h/db?replicated_claims=ON&sslmode=disable":                      {ReplicatedClaims: "on"},
		"postgres://u@h/db?replicated_claims=remote_apply":                            {ReplicatedClaims: "remote_apply"},
		"postgres://u@h/db?replicated_claims=remote_write":                            {ReplicatedClaims: "remote_write"},
		"postgres://u@a:1,b:2/db?target_session_attrs=read-write&replicated_claims=1": {ReplicatedClaims: "on"},
		"postgres://u@h/db?replicated_claims=on&replicated_claims_timeout=250ms":      {ReplicatedClaims: "on", ReplicatedClaimTimeout: 250 * time.Millisecond},
		"postgres://u@h/db?call_timeout=3s":                                           {CallTimeout: 3 * time.Second},
		"postgres://u@h/db?call_timeout=off":                                          {CallTimeout: -1},
	} {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		dsn, cfg, err := parsePostgres(in)
		if err != nil || cfg.ReplicatedClaims != want.ReplicatedClaims || cfg.ReplicatedClaimTimeout != want.ReplicatedClaimTimeout ||
			cfg.CallTimeout != want.CallTimeout || strings.Contains(dsn, "replicated") || strings.Contains(dsn, "call_timeout") {
			t.Errorf("%s: pgx DSN %q, %q %s %s, %v; want %q %s %s", in, dsn, cfg.ReplicatedClaims, cfg.ReplicatedClaimTimeout, cfg.CallTimeout, err,
				want.ReplicatedClaims, want.ReplicatedClaimTimeout, want.CallTimeout)
		}
	}
	if dsn, _, _ := parsePostgres("postgres://u@a:1,b:2/db?target_session_attrs=read-write&replicated_claims=on"); dsn != "postgres://u@a:1,b:2/db?target_session_attrs=read-write" {
		t.Errorf("multi-host DSN for pgx: %q", dsn)
	}
	for in, name := range map[string]string{
		"postgres://u@h/db?replicated_claims=local":                            "replicated_claims",
		"postgres://u@h/db?replicated_claims=":                                 "replicated_claims",
		"postgres://u@h/db?replicated_claims=on&replicated_claims_timeout=0":   "replicated_claims_timeout",
		"postgres://u@h/db?replicated_claims=on&replicated_claims_timeout=5":   "replicated_claims_timeout",
		"postgres://u@h/db?replicated_claims=on&replicated_claims_timeout=-1s": "replicated_claims_timeout",
		"postgres://u@h/db?replicated_claims_timeout=1s":                       "replicated_claims_timeout",
		"postgres://u@h/db?call_timeout=0":                                     "call_timeout",
		"postgres://u@h/db?call_timeout=soon":                                  "call_timeout",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", in, err, name)
		}
	}
}
