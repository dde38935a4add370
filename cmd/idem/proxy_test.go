package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
)

// proxyStores are the DSNs the proxy tests run against; each call makes a
// fresh, isolated store.
func proxyStores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"memory":   func(*testing.T) string { return "memory://" },
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "idem.db") },
		"postgres": func(t *testing.T) string { return pgtest.DSN(t) },
	}
}

func forEachProxyStore(t *testing.T, f func(t *testing.T, dsn string)) {
	for name, mk := range proxyStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, mk(t))
		})
	}
}

func TestProxyReplayAndPassThrough(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" && r.Header.Get("X-Idempotency-Key") != "" {
				t.Error("a protected request's X-Idempotency-Key was forwarded upstream")
			}
			switch r.URL.Path {
			case "/boom":
				w.WriteHeader(http.StatusInternalServerError)
			case "/busy":
				w.WriteHeader(http.StatusTooManyRequests)
			case "/unavailable":
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				w.Header().Set("Set-Cookie", "s=1")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"charged":true}`))
			}
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn)
		a := send(t, "POST", p.url("/charges"), `"c1"`, `{"amount":5}`)
		b := send(t, "POST", p.url("/charges"), `"c1"`, `{"amount":5}`)
		wantCode(t, a, 201, "")
		wantCode(t, b, 201, "")
		if b.body != `{"charged":true}` || b.header.Get("Idempotent-Replayed") != "true" || b.header.Get("Set-Cookie") != "" {
			t.Fatalf("replay: %q %v", b.body, b.header)
		}
		if n := up.count("/charges"); n != 1 {
			t.Fatalf("upstream saw %d charges, want 1", n)
		}
		wantCode(t, send(t, "POST", p.url("/charges"), `"c1"`, `{"amount":6}`), 422, "key-mismatch")
		// 5xx is recorded and replayed, 503 included (a gateway may answer
		// it after the upstream applied the request); 429, the default
		// release status, is not.
		send(t, "POST", p.url("/boom"), `"b1"`, `{}`)
		wantCode(t, send(t, "POST", p.url("/boom"), `"b1"`, `{}`), 500, "")
		send(t, "POST", p.url("/unavailable"), `"u1"`, `{}`)
		wantCode(t, send(t, "POST", p.url("/unavailable"), `"u1"`, `{}`), 503, "")
		send(t, "POST", p.url("/busy"), `"s1"`, `{}`)
		send(t, "POST", p.url("/busy"), `"s1"`, `{}`)
		if up.count("/boom") != 1 || up.count("/unavailable") != 1 || up.count("/busy") != 2 {
			t.Fatalf("upstream saw /boom %d times (want 1), /unavailable %d (want 1), /busy %d times (want 2)",
				up.count("/boom"), up.count("/unavailable"), up.count("/busy"))
		}
		// GET passes through untouched, key or not.
		send(t, "GET", p.url("/charges"), `"c1"`, "")
		if n := up.count("/charges"); n != 2 {
			t.Fatalf("GET was not passed through: upstream saw %d", n)
		}
	})
}

func TestProxyRequireKeyAndScope(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("for " + r.Header.Get("X-User-Id")))
		})
		p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--require-key", "--scope-header", "X-User-Id")
		wantCode(t, send(t, "POST", p.url("/x"), "", `{}`, "X-User-Id", "a"), 400, "key-missing")
		wantCode(t, send(t, "POST", p.url("/x"), `"bad`, `{}`, "X-User-Id", "a"), 400, "key-invalid")
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{}`), 401, "scope-missing")
		a := send(t, "POST", p.url("/x"), `"k"`, `{}`, "X-User-Id", "a")
		b := send(t, "POST", p.url("/x"), `"k"`, `{}`, "X-User-Id", "b")
		if a.body != "for a" || b.body != "for b" {
			t.Fatalf("principals crossed: %q, %q", a.body, b.body)
		}
		wantCode(t, send(t, "PATCH", p.url("/x"), "", `{}`, "X-User-Id", "a"), 400, "key-missing")
		if strings.Contains(p.logs(), "global scope") {
			t.Fatal("proxy with --scope-header warned about a global scope")
		}
	})
}

func TestProxyBodyLimit(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--max-body", "8")
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{"a":"0123456789"}`), 413, "body-too-large")
		if up.count("/x") != 0 {
			t.Fatal("oversized body reached the upstream")
		}
		if !strings.Contains(p.logs(), "global scope") {
			t.Fatal("proxy without --scope-header did not say keys share one global scope")
		}
	})
}

func TestProxyUpstreamUnreachableReleases(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		p := startProxy(t, "--global-scope", "--upstream", "http://"+closedAddr(t), "--store", dsn)
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{}`), 502, "upstream-unreachable")
		// Released: the retry is tried again (and fails the same way), not 409.
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{}`), 502, "upstream-unreachable")
	})
}

func TestProxyResetAfterSendIsUnknown(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // applied, then the connection dies
			}
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn)
		wantCode(t, send(t, "POST", p.url("/x"), `"k"`, `{}`), 504, "upstream-timeout")
		wantRetryUnknown(t, p, up)
	})
}

// wantRetryUnknown checks a retry of key "k" on /x, whose outcome the
// upstream left unknown: 409 outcome-unknown without Retry-After (waiting
// does not resolve it), and the upstream saw the first request only.
func wantRetryUnknown(t *testing.T, p *proc, up *upstream) {
	t.Helper()
	r := send(t, "POST", p.url("/x"), `"k"`, `{}`)
	wantCode(t, r, 409, "outcome-unknown")
	if ra := r.header.Get("Retry-After"); ra != "" {
		t.Fatalf("409 outcome-unknown with Retry-After %q", ra)
	}
	if n := up.count("/x"); n != 1 {
		t.Fatalf("upstream saw %d requests, want 1", n)
	}
}

// TestProxyUpstreamTimeoutIsUnknown: an upstream that takes the request and
// never answers gets --upstream-timeout; then the outcome is unknown: 504,
// and 409 on retries, which never reach the upstream.
func TestProxyUpstreamTimeoutIsUnknown(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		hung := make(chan struct{})
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			select { // applied, and no answer comes
			case <-hung:
			case <-r.Context().Done():
			}
		})
		t.Cleanup(func() { close(hung) })
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--upstream-timeout", "300ms")
		type answer struct {
			r   resp
			err error
		}
		first := make(chan answer, 1)
		go func() {
			r, err := trySend("POST", p.url("/x"), `"k"`, `{}`)
			first <- answer{r, err}
		}()
		select {
		case a := <-first:
			if a.err != nil {
				t.Fatal(a.err)
			}
			wantCode(t, a.r, 504, "upstream-timeout")
		case <-time.After(15 * time.Second):
			t.Fatal("no answer 15s after sending to a hung upstream with --upstream-timeout 300ms")
		}
		wantRetryUnknown(t, p, up)
	})
}

// TestProxyForwardsHeadersOfUnprotectedRequests: a protected request
// reaches the upstream with its Idempotency-Key (--forward-key, the
// default) and without X-Idempotency-Key; the requests the proxy does not
// protect reach it untouched.
func TestProxyForwardsHeadersOfUnprotectedRequests(t *testing.T) {
	t.Parallel()
	type seen struct{ key, xkey string }
	got := make(chan seen, 16)
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("Idempotency-Key"), r.Header.Get("X-Idempotency-Key")}
	})
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://")
	for _, c := range []struct {
		name, method, key, xkey string
		want                    seen
	}{
		{"protected POST", "POST", `"k1"`, "x1", seen{`"k1"`, ""}},
		{"GET", "GET", `"k2"`, "x2", seen{`"k2"`, "x2"}},
		{"HEAD", "HEAD", `"k3"`, "", seen{`"k3"`, ""}},
		{"OPTIONS", "OPTIONS", `"k4"`, "", seen{`"k4"`, ""}},
		{"PUT, outside --methods", "PUT", `"k5"`, "x5", seen{`"k5"`, "x5"}},
		{"keyless POST", "POST", "", "x6", seen{"", "x6"}},
	} {
		hdr := []string{}
		if c.xkey != "" {
			hdr = append(hdr, "X-Idempotency-Key", c.xkey)
		}
		send(t, c.method, p.url("/h"), c.key, "", hdr...)
		if s := <-got; s != c.want {
			t.Errorf("%s: upstream saw Idempotency-Key %q, X-Idempotency-Key %q; want %q, %q",
				c.name, s.key, s.xkey, c.want.key, c.want.xkey)
		}
	}
}

func TestProxyStorm(t *testing.T) {
	forEachProxyStore(t, func(t *testing.T, dsn string) {
		release := make(chan struct{})
		up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			<-release
			w.WriteHeader(http.StatusCreated)
		})
		p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", dsn, "--in-flight", "wait", "--wait", "60s")
		const n = 200
		var wg sync.WaitGroup
		codes := make(chan int, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := trySend("POST", p.url("/storm"), `"one-key"`, `{"amount":1}`)
				if err != nil {
					t.Error(err)
					return
				}
				codes <- r.status
			}()
		}
		<-up.arrived
		time.Sleep(200 * time.Millisecond) // let the others pile up behind it
		close(release)
		wg.Wait()
		close(codes)
		for c := range codes {
			if c != http.StatusCreated {
				t.Errorf("a duplicate got %d, want the replayed 201", c)
			}
		}
		if got := up.count("/storm"); got != 1 {
			t.Fatalf("upstream saw %d requests for one key, want 1", got)
		}
	})
}

func TestProxyAdmin(t *testing.T) {
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://", "--admin", "127.0.0.1:0")
	send(t, "POST", p.url("/x"), `"k"`, `{}`)
	send(t, "POST", p.url("/x"), `"k"`, `{}`)
	send(t, "POST", p.url("/x"), `"k"`, `{"other":1}`)
	h := send(t, "GET", "http://"+p.admin+"/healthz", "", "")
	if h.status != 200 || !strings.HasPrefix(h.body, "ok\n") || !strings.Contains(h.body, "spooled_outcomes 0\n") {
		t.Fatalf("/healthz: %d %s", h.status, h.body)
	}
	m := send(t, "GET", "http://"+p.admin+"/metrics", "", "")
	for _, want := range []string{
		"idem_store_replication_safe 1",
		`idem_requests_total{operation="POST",outcome="first"} 1`,
		`idem_requests_total{operation="POST",outcome="replay"} 1`,
		`idem_requests_total{operation="POST",outcome="mismatch"} 1`,
		`idem_store_op_duration_seconds_bucket{op="claim"`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
