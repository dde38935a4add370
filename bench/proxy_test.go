package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// The proxy comparison: a client sends POSTs over loopback to
//   - plain: httputil.ReverseProxy forwarding every request to a trivial
//     upstream;
//   - idem-replay: the composition `idem proxy` serves (idemhttp in front of
//     an httputil.ReverseProxy that drops the key header; see
//     cmd/idem/upstream.go), replaying recorded keys;
//   - idem-first: the same, every request a new key.
// All three run in one `go test -bench Proxy` invocation, on one machine
// state, through the same client.

func upstream(b *testing.B) *url.URL {
	srv := httptest.NewServer(app)
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func plainProxy(u *url.URL) http.Handler {
	return &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }}
}

func idemProxy(b *testing.B, u *url.URL) http.Handler {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
		Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost, http.MethodPatch}, Requirement: idemhttp.Optional}}})
	if err != nil {
		b.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.SetXForwarded()
		pr.Out.Header.Del(idemhttp.HeaderName)
		pr.Out.GetBody = nil
	}}
	return mw.Handler(rp)
}

func client() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

func post(c *http.Client, base, key string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/charges", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func runProxy(b *testing.B, h http.Handler, key func(n int64) string) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := client()
	defer c.CloseIdleConnections()
	var seq atomic.Int64
	b.SetParallelism(8) // 16 client goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			code, err := post(c, srv.URL, key(seq.Add(1)))
			if err != nil || code != http.StatusCreated {
				b.Errorf("status %d, %v", code, err)
				return
			}
		}
	})
}

const proxyReplayKeys = 100

// BenchmarkProxy compares replays through the idem proxy with a plain
// reverse proxy to the same upstream.
func BenchmarkProxy(b *testing.B) {
	u := upstream(b)
	b.Run("plain", func(b *testing.B) {
		runProxy(b, plainProxy(u), func(int64) string { return "" })
	})
	b.Run("idem-replay", func(b *testing.B) {
		h := idemProxy(b, u)
		srv := httptest.NewServer(h)
		c := client()
		for i := range proxyReplayKeys {
			if code, err := post(c, srv.URL, "r-"+strconv.Itoa(i)); err != nil || code != http.StatusCreated {
				b.Fatalf("recording: %d, %v", code, err)
			}
		}
		srv.Close()
		runProxy(b, h, func(n int64) string { return "r-" + strconv.FormatInt(n%proxyReplayKeys, 10) })
	})
	b.Run("idem-first", func(b *testing.B) {
		runProxy(b, idemProxy(b, u), func(n int64) string { return "f-" + strconv.FormatInt(n, 10) })
	})
}
