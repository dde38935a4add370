package storeopen

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/redisstore"
)

// TestRedisSentinelDSN: redis+sentinel:// lists Sentinels, names the
// master, gives user:pass to the Redis servers and sentinel_username /
// sentinel_password to the Sentinels, and passes go-redis's parameters
// through.
func TestRedisSentinelDSN(t *testing.T) {
	t.Parallel()
	o, ok := parseRedis(t, "redis+sentinel://app:s3cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/2?master=pay&pool_size=7&prefix=p&wait_replicas=all&sentinel_password=sent%21")
	if !ok {
		return
	}
	fo := o.failover
	if fo == nil || o.node != nil || o.cluster != nil {
		t.Fatalf("options %+v, want a failover client", o)
	}
	if !slices.Equal(fo.SentinelAddrs, []string{"10.0.0.1:26379", "10.0.0.2:26379", "[::1]:26380"}) || fo.MasterName != "pay" ||
		fo.DB != 2 || fo.PoolSize != 7 || fo.Username != "app" || fo.Password != "s3cret" ||
		fo.SentinelUsername != "" || fo.SentinelPassword != "sent!" {
		t.Fatalf("failover options %+v", fo)
	}
	if o.cfg.Prefix != "p" || o.cfg.Sentinel != fo || o.cfg.Wait == nil || o.cfg.Wait.Replicas != redisstore.AllReplicas {
		t.Fatalf("store config %+v", o.cfg)
	}
	if o, ok := parseRedis(t, "REDIS+SENTINEL://h?master=m&addr=h2%3A1"); ok &&
		(o.failover.DB != 0 || !slices.Equal(o.failover.SentinelAddrs, []string{"h:26379", "h2:1"}) || o.failover.Password != "") {
		t.Errorf("minimal DSN: %+v", o.failover)
	}
	d, err := Parse("redis+sentinel://app:s3cret@h/0?master=m&sentinel_password=t0psecret&password=qq")
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Redacted(); strings.Contains(r, "s3cret") || strings.Contains(r, "t0psecret") || strings.Contains(r, "qq") {
		t.Errorf("Redacted() = %q shows a password", r)
	}
	for in, want := range map[string]string{
		"redis+sentinel://h:26379/0":                               "master=NAME is required",
		"redis+sentinel://h:26379/0?master=":                       "master=NAME is required",
		"redis+sentinel://h/0?master_name=m":                       "master=NAME is required",
		"redis+sentinel://h/0?master=m&master_name=m":              "not master_name",
		"redis+sentinel://h/x?master=m":                            "database number",
		"redis+sentinel://h/0/1?master=m":                          "database number",
		"redis+sentinel://h:0?master=m":                            "port",
		"redis+sentinel://h,,k?master=m":                           "empty host in the Sentinel list",
		"redis+sentinel://h k?master=m":                            "not host:port",
		"redis+sentinel://h?master=m&replica_only=true":            "idem writes every claim to the primary",
		"redis+sentinel://h?master=m&route_by_latency=true":        "idem writes every claim to the primary",
		"redis+sentinel://h?master=m&cluster_refresh=1s":           "redis+cluster:// only",
		"redis+sentinel://h?master=m&no_such=1":                    "unexpected option",
		"redis://h/0?master=m":                                     "redis+sentinel:// only",
		"redis+cluster://a:1?sentinel_password=x":                  "redis+sentinel:// only",
		"redis+sentinel://u:pw@h/9x?master=m&sentinel_password=pw": "database number",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("Parse(%q) error %v shows the password", in, err)
		}
	}
	c, err := RedisClient(d)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestRedisWaitAllAndRefresh: wait_replicas=all and min_replicas become
// WaitConfig.Replicas = AllReplicas and MinReplicas; cluster_refresh (1s
// by default) becomes go-redis's ClusterStateReloadInterval.
func TestRedisWaitAllAndRefresh(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]redisstore.WaitConfig{
		"redis://h/0?wait_replicas=all":                                  {Replicas: redisstore.AllReplicas},
		"redis://h/0?wait_replicas=all&min_replicas=2&wait_timeout=2s":   {Replicas: redisstore.AllReplicas, MinReplicas: 2, Timeout: 2 * time.Second},
		"redis+cluster://a:1/0?wait_replicas=all&min_replicas=1":         {Replicas: redisstore.AllReplicas, MinReplicas: 1},
		"redis+sentinel://s/0?master=m&wait_replicas=all&pool_size=3":    {Replicas: redisstore.AllReplicas},
		"redis+sentinel://s/0?master=m&wait_replicas=2&wait_aof_local=1": {Replicas: 2, AOFLocal: 1},
	} {
		o, ok := parseRedis(t, in)
		if ok && (o.cfg.Wait == nil || *o.cfg.Wait != want) {
			t.Errorf("%s: Wait = %+v, want %+v", in, o.cfg.Wait, want)
		}
	}
	for in, want := range map[string]string{
		"redis://h/0?wait_replicas=every":                 "or all",
		"redis://h/0?wait_replicas=all&min_replicas=0":    "at least one replica",
		"redis://h/0?wait_replicas=all&min_replicas=-1":   "min_replicas",
		"redis://h/0?wait_replicas=all&min_replicas=some": "min_replicas",
		"redis://h/0?wait_replicas=2&min_replicas=1":      "wait_replicas=all only",
		"redis://h/0?min_replicas=1":                      "wait_replicas=all only",
		"redis://h/0?cluster_refresh=1s":                  "redis+cluster:// only",
		"redis+cluster://a:1?cluster_refresh=0":           "positive duration",
		"redis+cluster://a:1?cluster_refresh=often":       "positive duration",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", in, err, want)
		}
	}
	for in, want := range map[string]time.Duration{
		"redis+cluster://a:1,b:2":                         time.Second,
		"redis+cluster://a:1,b:2/0?cluster_refresh=250ms": 250 * time.Millisecond,
	} {
		if o, ok := parseRedis(t, in); ok && o.cluster.ClusterStateReloadInterval != want {
			t.Errorf("%s: ClusterStateReloadInterval %v, want %v", in, o.cluster.ClusterStateReloadInterval, want)
		}
	}
}

// TestOpenRedisSentinel opens a redis+sentinel:// DSN on a primary with a
// replica and three Sentinels the test starts: the store writes through
// the primary Sentinel names, and its replication check (through the
// CLI's wrapper) asks the Sentinels too: claims that do not wait are
// refused; wait_replicas=all is safe; a replica Sentinel knows but that
// is away from the primary is a warning.
func TestOpenRedisSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and three Sentinels")
	}
	t.Parallel()
	ctx := context.Background()
	const name = "idemdsn"
	primary := testenv.StartRedisNode(t, 7370, "--appendonly", "yes")
	replica := testenv.StartRedisNode(t, 7371, "--appendonly", "yes", "--replicaof", "127.0.0.1", "7370")
	var sentinels []string
	for i := range 3 {
		s := testenv.StartSentinel(t, 26370+i, name, primary.Addr(), 2, "sentinel down-after-milliseconds "+name+" 1000")
		sentinels = append(sentinels, s.Addr())
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	defer sc.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		m, err := sc.Master(ctx, name).Result()
		if err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sentinels not ready: %v %v", m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	base := "redis+sentinel://" + strings.Join(sentinels, ",") + "/0?master=" + name + "&prefix=" + randName(t)

	open := func(params string) idem.Store {
		st, err := Open(ctx, base+params, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	check := func(st idem.Store) idem.Replication {
		rep, err := st.(idem.ReplicationChecker).CheckReplication(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := check(open("")); rep.Safe() || !strings.Contains(rep.Findings[0].Problem, "asynchronous replication") {
		t.Errorf("claims that do not wait: %+v, want refused", rep)
	}
	st := open("&wait_replicas=all&wait_timeout=500ms")
	rep := check(st)
	if !rep.Safe() || len(rep.Findings) != 0 || !strings.Contains(rep.Topology, `"idemdsn" (3 Sentinels, quorum 2) with 1 replica`) {
		t.Errorf("wait_replicas=all: %+v, want safe", rep)
	}
	t.Logf("topology: %s", rep.Topology)
	e, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatalf("New through the DSN: %v", err)
	}
	defer e.Close()
	runs := 0
	for i := range 2 {
		r, err := e.DoBytes(ctx, idem.Request{Key: "dsn:v1:sentinel"}, func(context.Context, *idem.Attempt) ([]byte, error) {
			runs++
			return []byte("v"), nil
		})
		if err != nil || r.Replayed != (i == 1) {
			t.Fatalf("call %d = %+v, %v", i, r, err)
		}
	}
	if runs != 1 {
		t.Fatalf("effect ran %d times", runs)
	}
	// The replica goes away: Sentinel still knows it (and may promote it).
	replica.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; {
		rep = check(st)
		if len(rep.Findings) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no finding 10s after the replica died: %+v", rep)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var settings []string
	for _, f := range rep.Findings {
		settings = append(settings, f.Setting+"/"+f.Severity.String())
	}
	t.Logf("replica away: %s: %v", rep.Topology, rep.Findings)
	if !rep.Safe() || !slices.Contains(settings, "min_replicas/warning") {
		t.Errorf("findings %v, want a min_replicas warning (claims fail closed) and no refusal", settings)
	}
}
