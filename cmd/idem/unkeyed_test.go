package main

import (
	"net/http"
	"strings"
	"testing"
)

// unkeyedMetric is the idem_unkeyed_requests_total line for method and
// result, as /metrics exposes it.
func unkeyedMetric(method, result string) string {
	return `idem_unkeyed_requests_total{method="` + method + `",result="` + result + `"} `
}

// metricValue returns the value /metrics shows for the series prefix
// (name and labels, then a space), failing when it is absent.
func metricValue(t *testing.T, p *proc, prefix string) string {
	t.Helper()
	body := send(t, "GET", "http://"+p.admin+"/metrics", "", "").body
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s:\n%s", prefix, body)
	return ""
}

// Without --require-key, the proxy says at start-up that unkeyed mutating
// requests pass through unprotected, and counts each one that does, by
// method: keyed requests, GETs and methods outside --methods are not
// counted.
func TestProxyWarnsAndCountsUnkeyed(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	p := startProxy(t, "--global-scope", "--upstream", up.URL, "--store", "memory://", "--admin", "127.0.0.1:0")
	if !strings.Contains(p.logs(), "level=WARN msg=\""+unkeyedWarning+"\"") {
		t.Fatalf("no warning about unkeyed requests at start-up:\n%s", p.logs())
	}
	if v := metricValue(t, p, unkeyedMetric("POST", "forwarded")); v != "0" {
		t.Fatalf("before any request: %s, want 0", v)
	}
	wantCode(t, send(t, "POST", p.url("/charges"), "", `{"amount":5}`), 201, "")
	wantCode(t, send(t, "post", p.url("/charges"), "", `{"amount":5}`), 201, "")
	wantCode(t, send(t, "POST", p.url("/charges"), `"k1"`, `{"amount":5}`), 201, "")
	wantCode(t, send(t, "GET", p.url("/charges"), "", ""), 201, "")
	wantCode(t, send(t, "PUT", p.url("/charges"), "", `{}`), 201, "")
	wantCode(t, send(t, "PATCH", p.url("/charges/1"), "", `{}`), 201, "")
	if n := up.count("/charges"); n != 5 {
		t.Fatalf("upstream saw %d requests to /charges, want 5 (unkeyed ones pass through)", n)
	}
	if v := metricValue(t, p, unkeyedMetric("POST", "forwarded")); v != "2" {
		t.Fatalf("unkeyed POSTs: %s, want 2", v)
	}
	if v := metricValue(t, p, unkeyedMetric("PATCH", "forwarded")); v != "1" {
		t.Fatalf("unkeyed PATCHes: %s, want 1", v)
	}
	if m := send(t, "GET", "http://"+p.admin+"/metrics", "", "").body; strings.Contains(m, `method="PUT"`) || strings.Contains(m, `method="GET"`) {
		t.Fatalf("a method outside --methods was counted:\n%s", m)
	}
}

// With --require-key there is no warning; unkeyed requests get 400
// key-missing, never reach the upstream, and are counted as refused.
func TestProxyRequireKeyRefusesAndCounts(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	p := startProxy(t, "--global-scope", "--require-key", "--upstream", up.URL, "--store", "memory://", "--admin", "127.0.0.1:0")
	if strings.Contains(p.logs(), "idem_unkeyed_requests_total") {
		t.Fatalf("the unkeyed warning was logged with --require-key:\n%s", p.logs())
	}
	wantCode(t, send(t, "POST", p.url("/charges"), "", `{"amount":5}`), 400, "key-missing")
	wantCode(t, send(t, "POST", p.url("/charges"), "", `{"amount":5}`), 400, "key-missing")
	wantCode(t, send(t, "POST", p.url("/charges"), `"k1"`, `{"amount":5}`), 201, "")
	if n := up.count("/charges"); n != 1 {
		t.Fatalf("upstream saw %d requests, want 1 (the keyed one)", n)
	}
	if v := metricValue(t, p, unkeyedMetric("POST", "refused")); v != "2" {
		t.Fatalf("refused unkeyed POSTs: %s, want 2", v)
	}
	if m := send(t, "GET", "http://"+p.admin+"/metrics", "", "").body; strings.Contains(m, `result="forwarded"`) {
		t.Fatalf("a forwarded series exists with --require-key:\n%s", m)
	}
}
