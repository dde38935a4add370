package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// unreachableFinish is a store whose outcome writes fail, as one that went
// down right after the claim.
type unreachableFinish struct{ *memstore.Store }

func (unreachableFinish) Finish(context.Context, idem.FinishParams) (*idem.Record, error) {
	return nil, errors.New("connection refused")
}

// spoolOne leaves one outcome in a new spool directory and returns it.
func spoolOne(t *testing.T, key string) (string, *idem.Spool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "idem-spool")
	sp, err := idem.OpenSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(unreachableFinish{memstore.New()}, idem.Config{Spool: sp, FinishTimeout: 50 * time.Millisecond, SpoolInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.DoBytes(context.Background(), idem.Request{Key: idem.Key(key)},
		func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	return dir, sp
}

func TestListShowsSpooledOutcomes(t *testing.T) {
	t.Parallel()
	dir, _ := spoolOne(t, "order-42")
	dsn := seedRecord(t, "paid-1", nil)
	out, e, code := runCLI("list", "--store", dsn, "--spool", dir)
	if code != exitOK {
		t.Fatalf("code %d; stderr %q", code, e)
	}
	if !strings.Contains(out, "1 outcomes spooled in "+dir) || !strings.Contains(out, "order-42") || !strings.Contains(out, "succeeded") {
		t.Fatalf("list output lacks the spooled outcome:\n%s", out)
	}
	out, _, code = runCLI("list", "--store", dsn, "--spool", dir, "--json")
	if code != exitOK {
		t.Fatalf("--json code %d", code)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		found = found || (m["spooled"] == true && m["key"] == "order-42" && m["outcome"] == "succeeded")
	}
	if !found {
		t.Fatalf("--json output lacks the spooled outcome:\n%s", out)
	}
	out, _, _ = runCLI("list", "--store", dsn, "--spool", filepath.Join(t.TempDir(), "none"))
	if strings.Contains(out, "spooled") {
		t.Fatalf("a missing spool directory listed outcomes:\n%s", out)
	}
}

func TestHealthzReportsSpooledOutcomes(t *testing.T) {
	t.Parallel()
	_, sp := spoolOne(t, "k")
	srv := httptest.NewServer(adminHandler(memstore.New(), sp, prometheus.NewRegistry()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "spooled_outcomes 1") {
		t.Fatalf("/healthz = %d %q; want 200 with spooled_outcomes 1", resp.StatusCode, b)
	}
}

// TestHealthzDegradedWhileSpooled: with the store answering, /healthz says
// degraded, with the count, while the spool holds an outcome not applied
// yet; ok once it is empty.
func TestHealthzDegradedWhileSpooled(t *testing.T) {
	t.Parallel()
	_, sp := spoolOne(t, "order-7")
	h := adminHandler(memstore.New(), sp, prometheus.NewRegistry())
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusOK || !strings.HasPrefix(body, "degraded\n") || !strings.Contains(body, "spooled_outcomes 1\n") {
		t.Fatalf("/healthz with a spooled outcome: %d %q, want degraded and the count", code, body)
	}
	empty, err := idem.OpenSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h = adminHandler(memstore.New(), empty, prometheus.NewRegistry())
	if code, body := get(); code != http.StatusOK || !strings.HasPrefix(body, "ok\n") {
		t.Fatalf("/healthz with an empty spool: %d %q", code, body)
	}
}
