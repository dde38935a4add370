package storeopen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
)

// Redis DSNs:
//
//	redis://[user:pass@]host:port[/db][?prefix=idem]      standalone
//	rediss://…                                           the same over TLS
//	redis+cluster://[user:pass@]host:port,host:port[?prefix=idem]
//
// The prefix query parameter names the key prefix (default "idem"); the rest
// of the query goes to go-redis.

func checkRedis(d DSN) error {
	if d.Target == "" {
		return errors.New("empty; write redis://127.0.0.1:6379/0")
	}
	_, err := redisOptions(d)
	return err
}

// redisOpts is a parsed Redis DSN: go-redis's options for one node or for
// a Cluster (exactly one is set) and idem's key prefix.
type redisOpts struct {
	node    *redis.Options
	cluster *redis.ClusterOptions
	prefix  string
}

// redisOptions splits off idem's own prefix parameter and parses the rest
// with go-redis, keeping every option it read (pool_size, timeouts, …).
func redisOptions(d DSN) (redisOpts, error) {
	raw := d.Raw
	prefix := ""
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		q, err := url.ParseQuery(raw[i+1:])
		if err != nil {
			return redisOpts{}, fmt.Errorf("query: %v", err)
		}
		prefix = q.Get("prefix")
		q.Del("prefix")
		raw = raw[:i]
		if len(q) > 0 {
			raw += "?" + q.Encode()
		}
	}
	if d.Scheme == "redis+cluster" {
		u := "redis://" + strings.TrimPrefix(raw, d.Scheme+"://")
		// go-redis reads extra cluster nodes from addr= parameters.
		hostsEnd := strings.IndexAny(u[len("redis://"):], "/?")
		hosts := u[len("redis://"):]
		rest := ""
		if hostsEnd >= 0 {
			hosts, rest = hosts[:hostsEnd], hosts[hostsEnd:]
		}
		userinfo := ""
		if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
			userinfo, hosts = hosts[:at+1], hosts[at+1:]
		}
		list := strings.Split(hosts, ",")
		for _, h := range list {
			if h == "" {
				return redisOpts{}, errors.New("empty host in the cluster node list")
			}
		}
		u = "redis://" + userinfo + list[0] + strings.TrimPrefix(rest, "/")
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		for _, h := range list[1:] {
			u += sep + "addr=" + url.QueryEscape(h)
			sep = "&"
		}
		co, err := redis.ParseClusterURL(u)
		if err != nil {
			return redisOpts{}, err
		}
		return redisOpts{cluster: co, prefix: prefix}, nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return redisOpts{}, err
	}
	return redisOpts{node: o, prefix: prefix}, nil
}

func openRedis(ctx context.Context, d DSN, _ Options) (idem.Store, error) {
	opt, err := redisOptions(d)
	if err != nil {
		return nil, err
	}
	var client redis.UniversalClient
	if opt.cluster != nil {
		client = redis.NewClusterClient(opt.cluster)
	} else {
		client = redis.NewClient(opt.node)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, err
	}
	st, err := redisstore.New(client, redisstore.Config{Prefix: opt.prefix})
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
