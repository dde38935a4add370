package storeopen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
)

// Redis DSNs:
//
//	redis://[user:pass@]host:port[/db][?param=value…]       standalone
//	rediss://…                                            the same over TLS
//	redis+cluster://[user:pass@]host:port,host:port[/0][?param=value…]
//	redis+sentinel://[user:pass@]host:port[,host:port…][/db]?master=NAME[&param=value…]
//
// A Cluster has only database 0: its path is empty, "/" or "/0". A
// redis+sentinel:// DSN lists Sentinels (port 26379 when none is given);
// the client asks them for the primary of master NAME and follows it
// through failovers. Its user:pass authenticate to the Redis servers;
// Sentinels that require a password of their own take sentinel_username
// and sentinel_password.
//
// idem reads and removes its own parameters; the rest of the query goes to
// go-redis (pool_size, read_timeout, …):
//
//	prefix=idem            the key prefix (default idem)
//	wait_replicas=N|all    after a claim, WAIT until N replicas acknowledged
//	                       it; all: every replica connected to the primary
//	                       at that moment, and at least min_replicas. A
//	                       claim not confirmed in time fails closed (503,
//	                       its effect not run)
//	min_replicas=1         with wait_replicas=all, the fewest replicas each
//	                       claim must reach (default 1, at least 1)
//	wait_aof_local=1       after a claim, WAITAOF until the primary fsynced it
//	                       to its AOF (Redis 7.2+, appendonly yes)
//	wait_aof_replicas=N    after a claim, WAITAOF until N replicas fsynced it
//	                       (Redis 7.2+)
//	wait_timeout=1s        how long each WAIT/WAITAOF may take (default 1s)
//	cluster_refresh=1s     redis+cluster:// only: reload the slot map at
//	                       least this often (default 1s; go-redis's own
//	                       default is a minute), so that the shard of a
//	                       failed master finds its promoted replica within
//	                       seconds
//	master=NAME            redis+sentinel:// only (required): the name the
//	                       Sentinels monitor the primary under
//	sentinel_username=, sentinel_password=
//	                       redis+sentinel:// only: the Sentinels' own
//	                       credentials, when they require them
//
// Why wait_replicas=all rather than a count: Redis replication is
// asynchronous, and Sentinel or the Cluster may promote any replica (by
// replica-priority, then replication offset): only a claim every replica
// acknowledged is on whichever one is promoted. A count equal to the
// replicas there are is as safe until a failover leaves fewer; then every
// claim fails. See redisstore.WaitConfig.

// redisKeys are the query parameters idem reads from a Redis DSN.
var redisKeys = []string{"prefix", "pipeline", "wait_replicas", "min_replicas", "wait_aof_local", "wait_aof_replicas", "wait_timeout",
	"cluster_refresh", "master", "sentinel_username", "sentinel_password"}

// defaultClusterRefresh is cluster_refresh's default.
const defaultClusterRefresh = time.Second

func checkRedis(d DSN) error {
	if d.Target == "" {
		return errors.New("empty; write redis://127.0.0.1:6379/0")
	}
	_, err := redisOptions(d)
	return err
}

// redisOpts is a parsed Redis DSN: go-redis's options for one node, a
// Cluster or a Sentinel-managed primary (exactly one is set) and the
// store's configuration (prefix, wait, Sentinel).
type redisOpts struct {
	node     *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
	cfg      redisstore.Config
}

// client returns a client for the options; it does not connect.
func (o redisOpts) client() redis.UniversalClient {
	switch {
	case o.cluster != nil:
		return redis.NewClusterClient(o.cluster)
	case o.failover != nil:
		return redis.NewFailoverClient(o.failover)
	}
	return redis.NewClient(o.node)
}

// redisOptions splits off idem's own parameters and parses the rest with
// go-redis, keeping every option it read (pool_size, timeouts, …).
func redisOptions(d DSN) (redisOpts, error) {
	raw, q, err := splitParams(d.Raw, redisKeys)
	if err != nil {
		return redisOpts{}, err
	}
	cfg := redisstore.Config{Prefix: q.Get("prefix")}
	switch v := q.Get("pipeline"); v {
	case "", "on":
	case "off":
		cfg.Unpipelined = true
	default:
		return redisOpts{}, fmt.Errorf("pipeline=%q: want on (the default: concurrent claims and outcomes share pipelines) or off", v)
	}
	if cfg.Wait, err = parseWait(q); err != nil {
		return redisOpts{}, err
	}
	for _, k := range []string{"master", "sentinel_username", "sentinel_password"} {
		if q.Has(k) && d.Scheme != "redis+sentinel" {
			return redisOpts{}, fmt.Errorf("%s applies to redis+sentinel:// only", k)
		}
	}
	if q.Has("cluster_refresh") && d.Scheme != "redis+cluster" {
		return redisOpts{}, errors.New("cluster_refresh applies to redis+cluster:// only")
	}
	// raw still starts with the scheme as written (any case).
	_, rest, _ := strings.Cut(raw, "://")
	switch d.Scheme {
	case "redis+cluster":
		co, err := parseCluster(rest)
		if err != nil {
			return redisOpts{}, err
		}
		if co.ClusterStateReloadInterval, err = parseRefresh(q.Get("cluster_refresh")); err != nil {
			return redisOpts{}, err
		}
		return redisOpts{cluster: co, cfg: cfg}, nil
	case "redis+sentinel":
		fo, err := parseSentinel(rest, q)
		if err != nil {
			return redisOpts{}, err
		}
		cfg.Sentinel = fo
		return redisOpts{failover: fo, cfg: cfg}, nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return redisOpts{}, err
	}
	return redisOpts{node: o, cfg: cfg}, nil
}

// parseRefresh reads cluster_refresh: a positive duration, default 1s.
func parseRefresh(v string) (time.Duration, error) {
	if v == "" {
		return defaultClusterRefresh, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("cluster_refresh=%q is not a positive duration such as 1s", v)
	}
	return d, nil
}

// splitAuthority splits what follows "scheme://" into its credentials
// ("user:pass@" as written, or ""), its comma-separated hosts, its path
// and its query.
func splitAuthority(rest string) (userinfo string, hosts []string, path, query string) {
	authority, query, _ := strings.Cut(rest, "?")
	if i := strings.IndexByte(authority, '/'); i >= 0 {
		authority, path = authority[:i], authority[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	return userinfo, strings.Split(authority, ","), path, query
}

// parseSentinel parses what follows "redis+sentinel://":
// [user:pass@]host:port[,host:port…][/db][?go-redis parameters], with
// master, sentinel_username and sentinel_password from q.
func parseSentinel(rest string, q url.Values) (*redis.FailoverOptions, error) {
	master := q.Get("master")
	if master == "" {
		return nil, errors.New("master=NAME is required: the name the Sentinels monitor the primary under")
	}
	userinfo, hosts, path, query := splitAuthority(rest)
	if path != "" && path != "/" {
		if n, err := strconv.Atoi(path[1:]); err != nil || n < 0 {
			return nil, fmt.Errorf("path %q is not a database number such as /0", path)
		}
	}
	for i, h := range hosts {
		n, err := hostPort("Sentinel", h, "26379")
		if err != nil {
			return nil, err
		}
		hosts[i] = n
	}
	if vals, err := url.ParseQuery(query); err == nil && vals.Has("master_name") {
		return nil, errors.New("write master=NAME, not master_name")
	}
	// go-redis parses the database and the parameters from a URL naming
	// the first Sentinel; the Sentinel list and the credentials are ours
	// (go-redis would send user:pass to the Sentinels).
	u := "redis://" + hosts[0] + path
	if query != "" {
		u += "?" + query
	}
	fo, err := redis.ParseFailoverURL(u)
	if err != nil {
		return nil, err
	}
	if fo.ReplicaOnly || fo.RouteByLatency || fo.RouteRandomly {
		return nil, errors.New("replica_only, route_by_latency and route_randomly do not apply: idem writes every claim to the primary")
	}
	fo.MasterName = master
	// SentinelAddrs[1:] are any addr= parameters go-redis read.
	fo.SentinelAddrs = append(hosts, fo.SentinelAddrs[1:]...)
	if userinfo != "" {
		cred, err := url.Parse("redis://" + userinfo + "h")
		if err != nil {
			return nil, errors.New("the credentials before @ are not user:password (percent-encode reserved characters)")
		}
		fo.Username = cred.User.Username()
		fo.Password, _ = cred.User.Password()
	}
	fo.SentinelUsername, fo.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
	return fo, nil
}

// parseCluster parses what follows "redis+cluster://":
// [user:pass@]host:port,host:port[/0][?go-redis parameters].
func parseCluster(rest string) (*redis.ClusterOptions, error) {
	userinfo, nodes, path, query := splitAuthority(rest)
	if path != "" && path != "/" && path != "/0" {
		return nil, errors.New("a Redis Cluster has only database 0: write no path, / or /0")
	}
	for i, h := range nodes {
		n, err := hostPort("cluster node", h, "6379")
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	// go-redis parses the credentials and the parameters from a URL naming
	// the first node; the node list is ours.
	u := "redis://" + userinfo + nodes[0]
	if query != "" {
		u += "?" + query
	}
	co, err := redis.ParseClusterURL(u)
	if err != nil {
		return nil, err
	}
	// Addrs[1:] are any addr= parameters go-redis read.
	co.Addrs = append(nodes, co.Addrs[1:]...)
	return co, nil
}

// hostPort checks one host:port of a list of what (cluster nodes,
// Sentinels) and returns it as go-redis dials it; a missing port is
// defaultPort.
func hostPort(what, h, defaultPort string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host in the %s list", what)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port, err = net.SplitHostPort(h + ":" + defaultPort)
	}
	if err != nil || host == "" || strings.TrimLeft(host, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._:%") != "" {
		return "", fmt.Errorf("%s %q is not host:port", what, h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%s %q: port %q is not a number from 1 to 65535", what, h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// parseWait reads the wait_* parameters: nil when none asks for an
// acknowledgement.
func parseWait(q url.Values) (*redisstore.WaitConfig, error) {
	// count reads a non-negative integer parameter of at most max.
	count := func(name string, max int) (int, error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > max {
			if max == 1 {
				return 0, fmt.Errorf("%s=%q is not 0 or 1", name, v)
			}
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
		}
		return n, nil
	}
	var w redisstore.WaitConfig
	var err error
	if q.Get("wait_replicas") == "all" {
		w.Replicas = redisstore.AllReplicas
		if w.MinReplicas, err = count("min_replicas", math.MaxInt32); err != nil {
			return nil, err
		}
		if q.Has("min_replicas") && w.MinReplicas == 0 {
			return nil, errors.New("min_replicas=0: a claim that must survive a failover needs at least one replica to be on (leave wait_replicas unset to run without replicas)")
		}
	} else if w.Replicas, err = count("wait_replicas", math.MaxInt32); err != nil {
		return nil, fmt.Errorf("%w (or all: every connected replica)", err)
	} else if q.Has("min_replicas") {
		return nil, errors.New("min_replicas applies to wait_replicas=all only (a count is its own minimum)")
	}
	if w.AOFLocal, err = count("wait_aof_local", 1); err != nil {
		return nil, err
	}
	if w.AOFReplicas, err = count("wait_aof_replicas", math.MaxInt32); err != nil {
		return nil, err
	}
	if v := q.Get("wait_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("wait_timeout=%q is not a positive duration such as 500ms", v)
		}
		w.Timeout = d
	}
	if w.Replicas == 0 && w.AOFLocal == 0 && w.AOFReplicas == 0 {
		if w.Timeout != 0 {
			return nil, errors.New("wait_timeout without wait_replicas, wait_aof_local or wait_aof_replicas: nothing to wait for")
		}
		return nil, nil
	}
	return &w, nil
}

// RedisClient returns a go-redis client for a redis://, rediss://,
// redis+cluster:// or redis+sentinel:// DSN, configured as [Open]
// configures the store's client (idem's own parameters removed). It does
// not connect.
func RedisClient(d DSN) (redis.UniversalClient, error) {
	switch d.Scheme {
	case "redis", "rediss", "redis+cluster", "redis+sentinel":
	default:
		return nil, fmt.Errorf("storeopen: %s:// is not a Redis DSN", d.Scheme)
	}
	opt, err := redisOptions(d)
	if err != nil {
		return nil, fmt.Errorf("storeopen: %s DSN: %w", d.Scheme, err)
	}
	return opt.client(), nil
}

// RedisWait returns what a Redis DSN asks each claim to wait for (its
// wait_* and min_replicas parameters), or nil when it asks for nothing:
// for idem bench's raw side, which does the same write and wait.
func RedisWait(d DSN) (*redisstore.WaitConfig, error) {
	opt, err := redisOptions(d)
	if err != nil {
		return nil, fmt.Errorf("storeopen: %s DSN: %w", d.Scheme, err)
	}
	return opt.cfg.Wait, nil
}

func openRedis(ctx context.Context, d DSN, _ Options) (idem.Store, error) {
	opt, err := redisOptions(d)
	if err != nil {
		return nil, err
	}
	client := opt.client()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, err
	}
	st, err := redisstore.New(client, opt.cfg)
	if err != nil {
		client.Close()
		return nil, err
	}
	return &closeBoth{Store: st, close: client.Close}, nil
}

// closeBoth closes the store and then the client the CLI opened for it.
type closeBoth struct {
	idem.Store
	close func() error
}

func (c *closeBoth) Close() error { return errors.Join(c.Store.Close(), c.close()) }

// Subscribe passes the store's notifications through.
func (c *closeBoth) Subscribe(ctx context.Context, scope, key string) (<-chan struct{}, func(), error) {
	if n, ok := c.Store.(idem.Notifier); ok {
		return n.Subscribe(ctx, scope, key)
	}
	return nil, nil, errors.New("storeopen: store does not notify")
}
