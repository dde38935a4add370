package redisstore

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/listorder"
)

// scanCount is the COUNT hint of each SCAN step.
const scanCount = 1000

// List implements [idem.Store.List]. Redis has no index over the records,
// so List SCANs the store's keys (on every master in a Cluster), reads them
// in pipelines, then filters and sorts in memory: its cost grows with the
// number of records. It is an operator and reconciliation tool, never on
// the request path.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []idem.Record
	err := s.scanRecords(ctx, f.Scope, func(recs []idem.Record) {
		for _, r := range recs {
			if matches(&r, f) {
				out = append(out, r)
			}
		}
	})
	if err != nil {
		return nil, storeErr("list", err)
	}
	return listorder.Page(out, f.Limit), nil
}

func matches(r *idem.Record, f idem.ListFilter) bool {
	if f.Scope != "" && r.Scope != f.Scope {
		return false
	}
	if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
		return false
	}
	if !f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore) {
		return false
	}
	return listorder.After(r, f.After)
}

// Sweep implements [idem.Store.Sweep]. It SCANs for the store's records and
// runs, for each, a script that deletes it only if it is succeeded or failed
// and its stored expires_at is at or before p.Now — both checked in the
// script that deletes. A Limit of 0 or less means no limit. Records whose
// key TTL fired are already gone; Sweep catches those still inside
// Config.ExpiryGrace.
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	now := encTime(p.Now)
	var mu sync.Mutex
	deleted := 0
	err := s.forEachNode(ctx, func(ctx context.Context, node redis.Cmdable) error {
		return scanKeys(ctx, node, s.scanPattern(""), func(batch []string) (bool, error) {
			for len(batch) > 0 {
				chunk := batch
				if p.Limit > 0 {
					mu.Lock()
					room := p.Limit - deleted
					mu.Unlock()
					if room <= 0 {
						return false, nil
					}
					// Each script deletes at most one record, so running at
					// most room of them can never exceed Limit.
					chunk = batch[:min(room, len(batch))]
				}
				batch = batch[len(chunk):]
				n, err := sweepBatch(ctx, s.client, chunk, now)
				mu.Lock()
				deleted += n
				mu.Unlock()
				if err != nil {
					return false, err
				}
			}
			return true, nil
		})
	})
	if err != nil {
		return deleted, storeErr("sweep", err)
	}
	return deleted, nil
}

func sweepBatch(ctx context.Context, c redis.UniversalClient, batch []string, now string) (int, error) {
	cmds := make([]*redis.Cmd, len(batch))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range batch {
			// EVAL, not EVALSHA: in a Cluster the script may not be cached
			// on every master, and Sweep is off the hot path.
			cmds[i] = sweepScript.Eval(ctx, p, []string{k}, now)
		}
		return nil
	})
	n := 0
	for _, cmd := range cmds {
		if v, e := cmd.Int(); e == nil {
			n += v
		}
	}
	return n, err
}

// scanRecords reads every record of the store (or of one scope) in
// pipelined batches and hands them to fn, serially.
func (s *Store) scanRecords(ctx context.Context, scope string, fn func([]idem.Record)) error {
	var mu sync.Mutex
	return s.forEachNode(ctx, func(ctx context.Context, node redis.Cmdable) error {
		return scanKeys(ctx, node, s.scanPattern(scope), func(batch []string) (bool, error) {
			recs, err := readBatch(ctx, s.client, batch)
			if err != nil {
				return false, err
			}
			mu.Lock()
			fn(recs)
			mu.Unlock()
			return true, nil
		})
	})
}

func readBatch(ctx context.Context, c redis.UniversalClient, batch []string) ([]idem.Record, error) {
	cmds := make([]*redis.StringCmd, len(batch))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range batch {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, wrongType(err)
	}
	recs := make([]idem.Record, 0, len(batch))
	for _, cmd := range cmds {
		v, err := cmd.Result()
		if err == redis.Nil {
			continue // deleted between SCAN and GET
		}
		if err != nil {
			return nil, wrongType(err)
		}
		r, err := decodeRecord(v)
		if err != nil {
			return nil, err
		}
		recs = append(recs, *r)
	}
	return recs, nil
}

// forEachNode runs fn on every master of a Cluster, one after the other
// (so Sweep's limit is counted exactly), or once on the client.
func (s *Store) forEachNode(ctx context.Context, fn func(context.Context, redis.Cmdable) error) error {
	if s.cluster == nil {
		return fn(ctx, s.client)
	}
	var mu sync.Mutex
	var masters []*redis.Client
	err := s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		masters = append(masters, c)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range masters {
		if err := fn(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// scanKeys SCANs node for pattern, handing each non-empty batch to fn until
// the scan ends or fn returns false.
func scanKeys(ctx context.Context, node redis.Cmdable, pattern string, fn func([]string) (bool, error)) error {
	var cursor uint64
	for {
		batch, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			more, err := fn(batch)
			if err != nil || !more {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
