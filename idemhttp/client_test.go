package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// flaky answers each request with the next status in statuses (the last
// repeats) and records the keys and bodies it saw.
type flaky struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header
	keys     []string
	bodies   []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get(idemhttp.HeaderName))
	f.bodies = append(f.bodies, string(b))
	i := min(len(f.keys)-1, len(f.statuses)-1)
	f.mu.Unlock()
	for k, v := range f.header {
		w.Header()[k] = v
	}
	w.WriteHeader(f.statuses[i])
}

func TestTransportAttachesKey(t *testing.T) {
	t.Parallel()
	f := &flaky{statuses: []int{200}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &http.Client{Transport: &idemhttp.Transport{}}
	ctx := idemhttp.WithKey(context.Background(), "order:v1:42")
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get(idemhttp.HeaderName) != "" {
			t.Fatal("Transport modified the caller's request")
		}
	}
	if strings.Join(f.keys, " ") != `"order:v1:42" "order:v1:42"` {
		t.Fatalf("keys sent: %q", f.keys)
	}
}

func TestRetrierRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	f := &flaky{statuses: []int{503, 502, 201}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rt := &idemhttp.Retrier{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	ctx := idemhttp.WithKey(context.Background(), "k-1")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(`{"a":1}`))
	resp, err := rt.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || len(f.keys) != 3 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, len(f.keys))
	}
	for i := range f.keys {
		if f.keys[i] != `"k-1"` || f.bodies[i] != `{"a":1}` {
			t.Fatalf("attempt %d sent key %q body %q", i, f.keys[i], f.bodies[i])
		}
	}
}

func TestRetrierRefusesPostWithoutKey(t *testing.T) {
	t.Parallel()
	f := &flaky{statuses: []int{503}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	for _, m := range []string{"POST", "PATCH"} {
		req, _ := http.NewRequest(m, srv.URL, strings.NewReader("x"))
		_, err := (&idemhttp.Retrier{}).Do(req)
		if !errors.Is(err, idemhttp.ErrUnsafeRetry) || !strings.Contains(err.Error(), "Idempotency-Key") {
			t.Fatalf("%s without key: %v; want ErrUnsafeRetry saying why", m, err)
		}
	}
	if len(f.keys) != 0 {
		t.Fatalf("%d requests sent; want none", len(f.keys))
	}
}

func TestRetrierRetriesIdempotentMethods(t *testing.T) {
	t.Parallel()
	f := &flaky{statuses: []int{500, 200}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	req, _ := http.NewRequest("PUT", srv.URL, strings.NewReader("v"))
	resp, err := (&idemhttp.Retrier{MinBackoff: time.Millisecond}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(f.keys) != 2 || f.keys[0] != "" {
		t.Fatalf("PUT: status %d after %d attempts, key %q", resp.StatusCode, len(f.keys), f.keys)
	}
}

func TestRetrierHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	// A Retry-After beyond MaxRetryAfter ends the retries at once.
	f := &flaky{statuses: []int{409, 200}, header: http.Header{"Retry-After": {"3600"}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("v"))
	req.Header.Set(idemhttp.HeaderName, `"k"`)
	resp, err := (&idemhttp.Retrier{MaxRetryAfter: time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 409 || len(f.keys) != 1 {
		t.Fatalf("status %d after %d attempts; want the 409 after one", resp.StatusCode, len(f.keys))
	}
	// Retry-After: 0 is honoured as "now".
	g := &flaky{statuses: []int{409, 200}, header: http.Header{"Retry-After": {"0"}}}
	srv2 := httptest.NewServer(g)
	defer srv2.Close()
	req, _ = http.NewRequest("POST", srv2.URL, strings.NewReader("v"))
	req.Header.Set(idemhttp.HeaderName, `"k"`)
	resp, err = (&idemhttp.Retrier{MinBackoff: time.Hour}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d; want 200 after honouring Retry-After: 0", resp.StatusCode)
	}
}

func TestRetrierStopsAtMaxAttempts(t *testing.T) {
	t.Parallel()
	f := &flaky{statuses: []int{503}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := (&idemhttp.Retrier{MaxAttempts: 3, MinBackoff: time.Millisecond}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(f.keys) != 3 {
		t.Fatalf("%d attempts, want 3", len(f.keys))
	}
}
