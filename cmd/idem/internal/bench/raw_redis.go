package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/redisstore"
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
	if raw.wait, err = storeopen.RedisWait(d); err != nil {
		_ = client.Close()
		return nil, err
	}
	if raw.wait != nil {
		if raw.replicas, err = countReplicas(ctx, client); err != nil {
			_ = client.Close()
			return nil, err
		}
		dur += ", claims wait: " + describeWait(raw.wait, raw.replicas)
	}
	cleanup := func(ctx context.Context) error { return deleteMatching(ctx, client, name+"*") }
	return &target{idemDSN: withQuery(d.Raw, "prefix", name), raw: raw, cleanup: cleanup,
		footprint: redisFootprint(client, name), prefill: storePrefill(raw), meter: &redisMeter{c: client},
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

// redisRaw: SET NX claims, HSET records, HGETALL reads; no scripts. When
// the DSN makes idem's claims wait (wait_replicas, wait_aof_*), each SET
// NX is followed by the same WAIT (and WAITAOF) in one pipeline on the
// claim's connection, as a hand-written client would send them: for
// wait_replicas=all, WAIT for the replicas the key's primary had when
// the bench started.
type redisRaw struct {
	c      redis.UniversalClient
	prefix string
	wait   *redisstore.WaitConfig
	// replicas is each primary's online replicas at the start (ROLE), by
	// address ("" for a standalone or Sentinel client).
	replicas map[string]int
}

func (r *redisRaw) insert(ctx context.Context, key string) (bool, error) {
	k := r.prefix + key + ":lock"
	if r.wait == nil {
		return r.c.SetNX(ctx, k, benchAttempt, time.Hour).Result()
	}
	var p redis.Pipeliner
	n := r.replicas[""]
	switch c := r.c.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, k)
		if err != nil {
			return false, err
		}
		p, n = node.Pipeline(), r.replicas[node.Options().Addr]
	case *redis.Client:
		p = c.Pipeline()
	default:
		return false, fmt.Errorf("raw: WAIT needs a *redis.Client or *redis.ClusterClient, got %T", r.c)
	}
	w := r.wait
	if w.Replicas != redisstore.AllReplicas {
		n = w.Replicas
	} else {
		n = max(n, w.MinReplicas, 1)
	}
	timeout := w.Timeout
	if timeout == 0 {
		timeout = time.Second
	}
	set := p.SetNX(ctx, k, benchAttempt, time.Hour)
	// The Pipeliner has no WAIT of its own; Do sends it as written.
	var wait, aof *redis.Cmd
	if n > 0 {
		wait = p.Do(ctx, "wait", n, timeout.Milliseconds())
	}
	if w.AOFLocal > 0 || w.AOFReplicas > 0 {
		aof = p.Do(ctx, "waitaof", w.AOFLocal, w.AOFReplicas, timeout.Milliseconds())
	}
	if _, err := p.Exec(ctx); err != nil {
		return false, err
	}
	if wait != nil {
		if k, err := wait.Int64(); err != nil || k < int64(n) {
			return false, fmt.Errorf("raw: WAIT %d acknowledged by %d replicas within %s (%v)", n, k, timeout, err)
		}
	}
	if aof != nil {
		if v, err := aof.Int64Slice(); err != nil || len(v) != 2 || v[0] < int64(w.AOFLocal) || v[1] < int64(w.AOFReplicas) {
			return false, fmt.Errorf("raw: WAITAOF %d %d acknowledged by %v (%v)", w.AOFLocal, w.AOFReplicas, v, err)
		}
	}
	return set.Val(), nil
}

// countReplicas reads ROLE on each primary: how many replicas it counts as
// online.
func countReplicas(ctx context.Context, c redis.UniversalClient) (map[string]int, error) {
	count := func(ctx context.Context, n interface {
		Do(ctx context.Context, args ...interface{}) *redis.Cmd
	}) (int, error) {
		v, err := n.Do(ctx, "role").Slice()
		if err != nil {
			return 0, fmt.Errorf("ROLE: %w", err)
		}
		if len(v) != 3 || v[0] != "master" {
			return 0, fmt.Errorf("ROLE: not a primary (%.40v)", v)
		}
		reps, _ := v[2].([]interface{})
		return len(reps), nil
	}
	out := map[string]int{}
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			k, err := count(ctx, n)
			mu.Lock()
			out[n.Options().Addr] = k
			mu.Unlock()
			return err
		})
		return out, err
	}
	k, err := count(ctx, c)
	out[""] = k
	return out, err
}

// describeWait says what claims wait for, for the report's header.
func describeWait(w *redisstore.WaitConfig, replicas map[string]int) string {
	var parts []string
	switch {
	case w.Replicas == redisstore.AllReplicas:
		counts := make([]int, 0, len(replicas))
		for _, n := range replicas {
			counts = append(counts, n)
		}
		sort.Ints(counts)
		parts = append(parts, fmt.Sprintf("WAIT for all replicas (%v online)", counts))
	case w.Replicas > 0:
		parts = append(parts, fmt.Sprintf("WAIT %d", w.Replicas))
	}
	if w.AOFLocal > 0 || w.AOFReplicas > 0 {
		parts = append(parts, fmt.Sprintf("WAITAOF %d %d", w.AOFLocal, w.AOFReplicas))
	}
	return strings.Join(parts, " + ")
}

func (r *redisRaw) update(ctx context.Context, key string, result []byte) error {
	now := nowMicros()
	return r.c.HSet(ctx, r.prefix+key+":rec", "state", "succeeded", "fence", 1, "fp", benchFingerprint[:],
		"attempt", benchAttempt, "result", result, "created", now, "completed", now, "expires", now+3600e6).Err()
}

func (r *redisRaw) read(ctx context.Context, key string) (bool, error) {
	m, err := r.c.HGetAll(ctx, r.prefix+key+":rec").Result()
	return len(m) > 0, err
}

// close leaves the client to cleanup, which still needs it.
func (r *redisRaw) close() error { return nil }
