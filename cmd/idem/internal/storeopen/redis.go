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
//
// A Cluster has only database 0: its path is empty, "/" or "/0".
//
// idem reads and removes its own parameters; the rest of the query goes to
// go-redis (pool_size, read_timeout, …):
//
//	prefix=idem            the key prefix (default idem)
//	wait_replicas=N        after a claim, WAIT until N replicas acknowledged it
//	wait_aof_local=1       after a claim, WAITAOF until the primary fsynced it
//	                       to its AOF (Redis 7.2+, appendonly yes)
//	wait_aof_replicas=N    after a claim, WAITAOF until N replicas fsynced it
//	                       (Redis 7.2+)
//	wait_timeout=1s        how long each WAIT/WAITAOF may take (default 1s);
//	                       a claim not confirmed in time is an error and its
//	                       effect does not run
//
// See redisstore.WaitConfig.

// redisKeys are the query parameters idem reads from a Redis DSN.
var redisKeys = []string{"prefix", "wait_replicas", "wait_aof_local", "wait_aof_replicas", "wait_timeout"}

func checkRedis(d DSN) error {
	if d.Target == "" {
		return errors.New("empty; write redis://127.0.0.1:6379/0")
	}
	_, err := redisOptions(d)
	return err
}

// redisOpts is a parsed Redis DSN: go-redis's options for one node or for
// a Cluster (exactly one is set) and the store's configuration (prefix and
// wait).
type redisOpts struct {
	node    *redis.Options
	cluster *redis.ClusterOptions
	cfg     redisstore.Config
}

// client returns a client for the options; it does not connect.
func (o redisOpts) client() redis.UniversalClient {
	if o.cluster != nil {
		return redis.NewClusterClient(o.cluster)
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
	if cfg.Wait, err = parseWait(q); err != nil {
		return redisOpts{}, err
	}
	if d.Scheme == "redis+cluster" {
		// raw still starts with the scheme as written (any case).
		co, err := parseCluster(raw[len(d.Scheme)+len("://"):])
		if err != nil {
			return redisOpts{}, err
		}
		return redisOpts{cluster: co, cfg: cfg}, nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return redisOpts{}, err
	}
	return redisOpts{node: o, cfg: cfg}, nil
}

// parseCluster parses what follows "redis+cluster://":
// [user:pass@]host:port,host:port[/0][?go-redis parameters].
func parseCluster(rest string) (*redis.ClusterOptions, error) {
	authority, query, _ := strings.Cut(rest, "?")
	path := ""
	if i := strings.IndexByte(authority, '/'); i >= 0 {
		authority, path = authority[:i], authority[i:]
	}
	if path != "" && path != "/" && path != "/0" {
		return nil, errors.New("a Redis Cluster has only database 0: write no path, / or /0")
	}
	userinfo := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	nodes := strings.Split(authority, ",")
	for i, h := range nodes {
		n, err := clusterNode(h)
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

// clusterNode checks one host:port of a Cluster's node list and returns it
// as go-redis dials it; a missing port is go-redis's default, 6379.
func clusterNode(h string) (string, error) {
	if h == "" {
		return "", errors.New("empty host in the cluster node list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port, err = net.SplitHostPort(h + ":6379")
	}
	if err != nil || host == "" || strings.TrimLeft(host, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-._:%") != "" {
		return "", fmt.Errorf("cluster node %q is not host:port", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("cluster node %q: port %q is not a number from 1 to 65535", h, port)
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
	if w.Replicas, err = count("wait_replicas", math.MaxInt32); err != nil {
		return nil, err
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

// RedisClient returns a go-redis client for a redis://, rediss:// or
// redis+cluster:// DSN, configured as [Open] configures the store's client
// (idem's own parameters removed). It does not connect.
func RedisClient(d DSN) (redis.UniversalClient, error) {
	switch d.Scheme {
	case "redis", "rediss", "redis+cluster":
	default:
		return nil, fmt.Errorf("storeopen: %s:// is not a Redis DSN", d.Scheme)
	}
	opt, err := redisOptions(d)
	if err != nil {
		return nil, fmt.Errorf("storeopen: %s DSN: %w", d.Scheme, err)
	}
	return opt.client(), nil
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
