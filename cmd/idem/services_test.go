package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/mysqltest"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
	"github.com/idemkit/idem/internal/testenv"
)

// serviceStores are the stores the other CLI tests do not run on, each
// call a fresh, isolated store: Redis (keys under a random prefix), Redis
// Cluster, and MariaDB (a scratch table dropped at the end).
func serviceStores() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"redis": func(t *testing.T) string {
			return strings.TrimSuffix(testenv.Redis.Need(t), "/") + "?prefix=" + scratchName(t)
		},
		"redis+cluster": func(t *testing.T) string {
			return "redis+cluster://" + testenv.RedisCluster.Need(t) + "?prefix=" + scratchName(t)
		},
		"mysql": func(t *testing.T) string { return mysqltest.URL(t, storeopen.MySQLURL) },
	}
}

func scratchName(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "idem_cli_" + hex.EncodeToString(b)
}

// TestCommandsOnServiceStores runs the operator's round on Redis, Redis
// Cluster and MariaDB through the CLI: migrate, the proxy recording one
// request and leaving another unknown, get, list --state unknown,
// resolve --as released (after which the key runs once more), and sweep.
func TestCommandsOnServiceStores(t *testing.T) {
	for name, mk := range serviceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := mk(t)
			if out, errs, code := runCLI("migrate", "--store", dsn); code != 0 {
				t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
			}
			var hangs atomic.Int64
			up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hang" && hangs.Add(1) == 1 {
					time.Sleep(800 * time.Millisecond) // past --upstream-timeout
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"ok":true}`))
			})
			p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--upstream-timeout", "300ms", "--allow-volatile-store") // test servers may run without persistence
			wantCode(t, send(t, "POST", p.url("/charges"), `"paid"`, `{"amount":5}`), 201, "")
			if r := send(t, "POST", p.url("/charges"), `"paid"`, `{"amount":5}`); r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("no replay: %d %v", r.status, r.header)
			}
			wantCode(t, send(t, "POST", p.url("/hang"), `"lost"`, `{}`), 504, "")

			out, errs, code := runCLI("get", "--store", dsn, "paid", "--json")
			var rec struct {
				State string `json:"state"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.State != "succeeded" {
				t.Fatalf("get: exit %d, state %q\n%s%s", code, rec.State, out, errs)
			}
			out, errs, code = runCLI("list", "--store", dsn, "--state", "unknown", "--json")
			if code != 0 || !strings.Contains(out, `"lost"`) || strings.Contains(out, `"paid"`) {
				t.Fatalf("list --state unknown: exit %d\n%s%s", code, out, errs)
			}
			if out, errs, code := runCLI("resolve", "--store", dsn, "lost", "--as", "released", "--reason", "upstream never applied it"); code != 0 {
				t.Fatalf("resolve: exit %d\n%s%s", code, out, errs)
			}
			wantCode(t, send(t, "POST", p.url("/hang"), `"lost"`, `{}`), 201, "")
			if n := up.count("/hang"); n != 2 {
				t.Fatalf("upstream saw /hang %d times, want 2 (once before and once after the release)", n)
			}
			if out, errs, code := runCLI("sweep", "--store", dsn); code != 0 {
				t.Fatalf("sweep: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}
