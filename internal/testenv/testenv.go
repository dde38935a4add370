// Package testenv locates the real services that idem's tests run against.
//
// Each service is found through an environment variable with a loopback
// default. When the service is unreachable the test is skipped with a message
// that names the variable — unless IDEM_REQUIRE_SERVICES=1, in which case it
// fails, so that a green CI run can never hide a skipped backend.
package testenv

import (
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testenv/counts"
)

// Service describes one backing service.
type Service struct {
	Name    string // human name, e.g. "PostgreSQL"
	Env     string // environment variable holding the address or URL
	Default string // loopback default
}

// The services idem's tests use.
var (
	Postgres = Service{"PostgreSQL", "IDEM_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"}
	MySQL    = Service{"MariaDB/MySQL", "IDEM_TEST_MYSQL", "root@tcp(127.0.0.1:3306)/test"}
	Redis    = Service{"Redis", "IDEM_TEST_REDIS", "redis://127.0.0.1:6379/0"}
	NATS     = Service{"NATS JetStream", "IDEM_TEST_NATS", "nats://127.0.0.1:4222"}
	AMQP     = Service{"RabbitMQ", "IDEM_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/"}
	// RedisCluster is a comma-separated list of cluster node addresses; it
	// has no default because a cluster is started by .ci/run.
	RedisCluster = Service{"Redis Cluster", "IDEM_TEST_REDIS_CLUSTER", ""}
)

// Required reports whether IDEM_REQUIRE_SERVICES=1 is set.
func Required() bool { return os.Getenv("IDEM_REQUIRE_SERVICES") == "1" }

// URL returns the configured address of s, or its default.
func (s Service) URL() string {
	if v := os.Getenv(s.Env); v != "" {
		return v
	}
	return s.Default
}

// Need returns the service's address after checking that it accepts TCP
// connections. It skips t when the service is unreachable, or fails t when
// IDEM_REQUIRE_SERVICES=1.
func (s Service) Need(t testing.TB) string {
	t.Helper()
	u := s.URL()
	if u == "" {
		s.unavailable(t, "not configured")
		return ""
	}
	for _, addr := range hostPorts(u) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			s.unavailable(t, err.Error())
			return ""
		}
		c.Close()
	}
	return u
}

func (s Service) unavailable(t testing.TB, why string) {
	t.Helper()
	msg := s.Name + " unavailable (" + why + "); set " + s.Env + " to run this test"
	if Required() {
		t.Fatalf("%s — failing because IDEM_REQUIRE_SERVICES=1", msg)
	}
	t.Skipf("SKIP: %s", msg)
}

// hostPorts extracts host:port pairs from a URL, a go-sql-driver DSN
// (user@tcp(host:port)/db) or a comma-separated address list.
func hostPorts(u string) []string {
	if i := strings.Index(u, "tcp("); i >= 0 {
		rest := u[i+4:]
		if j := strings.IndexByte(rest, ')'); j >= 0 {
			return []string{rest[:j]}
		}
	}
	if !strings.Contains(u, "://") {
		return strings.Split(u, ",")
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		// Multi-host URLs (redis+cluster://a:1,b:2) don't parse as one host.
		if i := strings.Index(u, "://"); i >= 0 {
			rest := u[i+3:]
			if j := strings.IndexAny(rest, "/?"); j >= 0 {
				rest = rest[:j]
			}
			if k := strings.LastIndexByte(rest, '@'); k >= 0 {
				rest = rest[k+1:]
			}
			return strings.Split(rest, ",")
		}
		return nil
	}
	return strings.Split(p.Host, ",")
}

// BenchPrefills are the table sizes a store's prefilled benchmarks run at:
// none and 10k by default; IDEM_BENCH_PREFILL lists others ("0,10k,1M"),
// which take minutes to load.
func BenchPrefills(tb testing.TB) []int64 {
	env := os.Getenv("IDEM_BENCH_PREFILL")
	if env == "" {
		return []int64{0, 10_000}
	}
	sizes, err := counts.ParseList(env)
	if err != nil {
		tb.Fatalf("IDEM_BENCH_PREFILL=%q: %v", env, err)
	}
	return sizes
}
