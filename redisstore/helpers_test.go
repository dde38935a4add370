package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend builds clients for one kind of Redis deployment.
type backend struct {
	name   string
	client func(t testing.TB) redis.UniversalClient
}

var backends = []backend{
	{"standalone", standaloneClient},
	{"cluster", clusterClient},
}

func standaloneClient(t testing.TB) redis.UniversalClient { return standaloneClientWith(t, nil) }

// standaloneClientWith is standaloneClient with its options changed by
// edit (when not nil) before the client is made.
func standaloneClientWith(t testing.TB, edit func(*redis.Options)) *redis.Client {
	t.Helper()
	u := testenv.Redis.Need(t)
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	opt.PoolSize = 32
	if edit != nil {
		edit(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func clusterClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	return clusterClientAt(t, testenv.RedisCluster.Need(t))
}

func clusterClientAt(t testing.TB, addrs string) *redis.ClusterClient {
	t.Helper()
	addrs = strings.TrimPrefix(addrs, "redis+cluster://")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), PoolSize: 32})
	t.Cleanup(func() { c.Close() })
	return c
}

// uniquePrefix isolates one test's keys from every other test's.
func uniquePrefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "idemtest-" + hex.EncodeToString(b[:])
}

// newStoreOn returns a store with a unique prefix on c, closed and its
// keys deleted when the test ends.
func newStoreOn(t testing.TB, c redis.UniversalClient, cfg Config) *Store {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = uniquePrefix(t)
	}
	s, err := New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, s)
	})
	return s
}

func deletePrefix(t testing.TB, s *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.forEachNode(ctx, func(ctx context.Context, node redis.Cmdable) error {
		return scanKeys(ctx, node, globEscape(s.prefix)+":*", func(batch []string) (bool, error) {
			for _, k := range batch {
				if err := node.Del(ctx, k).Err(); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	})
	if err != nil {
		t.Logf("cleanup of prefix %s: %v", s.prefix, err)
	}
}

// clock is a fixed test time, truncated to the microsecond as the engine does.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)

func claimP(key, attempt string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{
		Scope: "tenant-a", Key: key, AttemptID: attempt,
		Fingerprint: idem.NewFingerprint([]byte(key)),
		Intent:      []byte(`{"op":"charge"}`),
		Now:         now, LeaseUntil: now.Add(30 * time.Second),
	}
}

func mustClaim(t testing.TB, s *Store, p idem.ClaimParams) idem.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", p.Key, p.AttemptID, err)
	}
	return res
}

func finishP(r idem.Record, st idem.State, result string, now time.Time) idem.FinishParams {
	p := idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID,
		State: st, Result: []byte(result), CompletedAt: now}
	if st.Terminal() {
		p.ExpiresAt = now.Add(time.Hour)
	}
	return p
}
