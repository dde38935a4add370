package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

var (
	_ idem.DurabilityChecker = (*Store)(nil)
	_ idem.StoreClock        = (*Store)(nil)
)

// CheckDurability reads, with CONFIG GET, the settings that let Redis
// forget a record (on every primary of a Cluster):
//   - maxmemory-policy other than noeviction: under memory pressure Redis
//     deletes keys, records included, and a finished key runs again
//     (refuse; even with maxmemory 0 today, one CONFIG SET maxmemory
//     starts the evicting).
//   - appendonly no and no save points: a restart starts empty (refuse).
//   - only save points (RDB): a crash loses what was written since the
//     last snapshot (warning).
//   - appendfsync no: an operating-system crash loses what the kernel had
//     not written yet (warning).
//
// A server that refuses CONFIG (renamed or denied by an ACL, as managed
// services do) gives a warning finding that says so, naming what to check
// by other means.
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.cluster == nil {
		return checkNode(ctx, s.client, "")
	}
	var (
		mu  sync.Mutex
		all []idem.Finding
	)
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		f, err := checkNode(ctx, c, c.Options().Addr+": ")
		mu.Lock()
		all = append(all, f...)
		mu.Unlock()
		return err
	})
	return all, err
}

// checkNode checks one server; node prefixes each finding's value.
func checkNode(ctx context.Context, c redis.Cmdable, node string) ([]idem.Finding, error) {
	cfg, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return []idem.Finding{{
				Setting: "CONFIG", Value: node + "unreadable",
				Problem:  fmt.Sprintf("the server refuses CONFIG GET (%v), so idem cannot see whether it evicts keys or keeps them across a restart", rerr),
				Fix:      "confirm with the provider or redis.conf that maxmemory-policy is noeviction and appendonly is yes, or allow CONFIG GET for idem's user (ACL: +config|get)",
				Severity: idem.SeverityWarning,
			}}, nil
		}
		return nil, fmt.Errorf("redisstore: CONFIG GET: %w", err)
	}
	var out []idem.Finding
	if p := cfg["maxmemory-policy"]; p != "" && p != "noeviction" {
		out = append(out, idem.Finding{
			Setting: "maxmemory-policy", Value: node + p,
			Problem:  "Redis deletes keys when it reaches maxmemory, recorded outcomes included, and a retry of a finished key runs its effect again",
			Fix:      "CONFIG SET maxmemory-policy noeviction (and in redis.conf), and give the server the memory the records need: a full server then refuses writes, which idem reports as store unavailable (503), never as a second effect",
			Severity: idem.SeverityRefuse,
		})
	}
	aof := cfg["appendonly"] == "yes"
	rdb := strings.TrimSpace(cfg["save"]) != ""
	switch {
	case !aof && !rdb:
		out = append(out, idem.Finding{
			Setting: "appendonly, save", Value: node + `no, ""`,
			Problem:  "Redis keeps records only in memory: a restart forgets every one, and every finished key runs its effect again on its next retry",
			Fix:      "CONFIG SET appendonly yes (appendfsync everysec or always) and write it to redis.conf (CONFIG REWRITE)",
			Severity: idem.SeverityRefuse,
		})
	case !aof:
		out = append(out, idem.Finding{
			Setting: "appendonly", Value: node + "no (save " + strings.TrimSpace(cfg["save"]) + ")",
			Problem:  "only RDB snapshots persist records: a crash forgets what was recorded since the last snapshot, and those keys run again",
			Fix:      "CONFIG SET appendonly yes (appendfsync everysec or always) and CONFIG REWRITE",
			Severity: idem.SeverityWarning,
		})
	case cfg["appendfsync"] == "no":
		out = append(out, idem.Finding{
			Setting: "appendfsync", Value: node + "no",
			Problem:  "the AOF is flushed when the kernel decides: an operating-system crash or power cut forgets up to about 30s of records",
			Fix:      "CONFIG SET appendfsync everysec (at most 1s lost) or always, and CONFIG REWRITE",
			Severity: idem.SeverityWarning,
		})
	}
	return out, nil
}

// StoreTime returns the server's clock (TIME).
func (s *Store) StoreTime(ctx context.Context) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, storeErr("time", err)
	}
	return t, nil
}
