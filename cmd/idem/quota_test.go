package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestProxyScopeQuotas: --scope-quota-rate 2/min lets one scope start
// two new keys, then answers 429 scope-quota with Retry-After without
// forwarding; replays and other scopes pass; --scope-quota-inflight 1
// refuses a second request of a scope while its first runs. Both are
// counted in idem_scope_quota_rejected_total{quota}.
func TestProxyScopeQuotas(t *testing.T) {
	release := make(chan struct{})
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	})
	p := startProxy(t, "--upstream", up.URL, "--store", "memory://", "--admin", "127.0.0.1:0",
		"--scope-header", "X-User", "--scope-quota-rate", "2/min", "--scope-quota-inflight", "1")
	for _, k := range []string{`"k1"`, `"k2"`} {
		wantCode(t, send(t, "POST", p.url("/pay"), k, `{}`, "X-User", "alice"), 201, "")
	}
	r := send(t, "POST", p.url("/pay"), `"k3"`, `{}`, "X-User", "alice")
	wantCode(t, r, 429, "scope-quota")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if n := up.count("/pay"); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2: the refused one must not be forwarded", n)
	}
	wantCode(t, send(t, "POST", p.url("/pay"), `"k1"`, `{}`, "X-User", "alice"), 201, "") // a replay
	// In flight: bob's first request holds his only slot.
	done := make(chan resp, 1)
	go func() { done <- send(t, "POST", p.url("/slow"), `"s1"`, `{}`, "X-User", "bob") }()
	<-up.arrived // alice's two
	<-up.arrived
	<-up.arrived // bob's slow one
	wantCode(t, send(t, "POST", p.url("/pay"), `"s2"`, `{}`, "X-User", "bob"), 429, "scope-quota")
	close(release)
	wantCode(t, <-done, 201, "")
	m := send(t, "GET", "http://"+p.admin+"/metrics", "", "")
	for _, want := range []string{
		`idem_scope_quota_rejected_total{quota="rate"} 1`,
		`idem_scope_quota_rejected_total{quota="inflight"} 1`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestProxyScopeQuotaFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--scope-quota-inflight", "-1"},
		{"--scope-quota-inflight", "x"},
		{"--scope-quota-rate", "10"},
		{"--scope-quota-rate", "0/min"},
		{"--scope-quota-rate", "ten/min"},
		{"--scope-quota-rate", "10/day"},
	} {
		out, errs, code := cli(t, append([]string{"proxy", "--global-scope", "--upstream", "http://127.0.0.1:1", "--store", "memory://"}, args...)...)
		if code != 2 || !strings.Contains(errs, args[0]) || !strings.Contains(errs, "Run 'idem proxy --help' for usage.") {
			t.Errorf("%v: exit %d\n%s%s; want 2 naming the flag", args, code, out, errs)
		}
	}
}
