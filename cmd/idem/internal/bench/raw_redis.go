package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// Redis: idem's store gets prefix=<scratch>, the raw side keys under
// <scratch>_raw:; every key matching <scratch>* is deleted at the end.
func openRedisTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	// storeopen's parser, as for idem's store: the same nodes, pool and
	// timeouts on both sides.
	client, err := storeopen.RedisClient(d)
	if err != nil {
		return nil, err
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	dur, note := "appendonly=?, appendfsync=?", ""
	if cfg, err := client.ConfigGet(ctx, "append*").Result(); err == nil {
		dur = fmt.Sprintf("appendonly=%s, appendfsync=%s", cfg["appendonly"], cfg["appendfsync"])
		note = redisDurabilityNote(cfg["appendonly"], cfg["appendfsync"])
	}
	raw := &redisRaw{c: client, prefix: name + "_raw:"}
	cleanup := func(ctx context.Context) error { return deleteMatching(ctx, client, name+"*") }
	return &target{idemDSN: withQuery(d.Raw, "prefix", name), raw: raw, cleanup: cleanup,
		footprint: redisFootprint(client, name), prefill: storePrefill(raw),
		durability: dur, durabilityNote: note}, nil
}

func deleteMatching(ctx context.Context, c redis.UniversalClient, pattern string) error {
	// Keys are unlinked in pipelines of up to 1,000 (one key per command,
	// so that Cluster slots never mix): a bench run leaves hundreds of
	// thousands, which one round trip each would take minutes to delete.
	del := func(ctx context.Context, n *redis.Client) error {
		it := n.Scan(ctx, 0, pattern, 1000).Iterator()
		pipe := n.Pipeline()
		for it.Next(ctx) {
			pipe.Unlink(ctx, it.Val())
			if pipe.Len() >= 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		if pipe.Len() > 0 {
			_, err := pipe.Exec(ctx)
			return err
		}
		return nil
	}
	var err error
	switch cc := c.(type) {
	case *redis.ClusterClient:
		err = cc.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, cc)
	}
	return errors.Join(err, c.Close())
}

// redisRaw: SET NX claims, HSET records, HGETALL reads; no scripts.
type redisRaw struct {
	c      redis.UniversalClient
	prefix string
}

func (r *redisRaw) insert(ctx context.Context, key string) (bool, error) {
	return r.c.SetNX(ctx, r.prefix+key+":lock", benchAttempt, time.Hour).Result()
}

func (r *redisRaw) update(ctx context.Context, key string, result []byte) error {
	now := nowMicros()
	return r.c.HSet(ctx, r.prefix+key+":rec", "state", "succeeded", "fence", 1, "fp", benchFingerprint[:],
		"attempt", benchAttempt, "result", result, "created", now, "completed", now, "expires", now+3600e6).Err()
}

func (r *redisRaw) read(ctx context.Context, key string) error {
	return r.c.HGetAll(ctx, r.prefix+key+":rec").Err()
}

// close leaves the client to cleanup, which still needs it.
func (r *redisRaw) close() error { return nil }
