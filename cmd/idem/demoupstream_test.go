package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoProc is a running idem demo-upstream.
type demoProc struct {
	cmd   *exec.Cmd
	base  string      // http://ADDR, from its first line
	lines chan string // the lines it printed after the first
	done  chan error
}

// startDemo starts idem demo-upstream with args on a free port and reads
// the first line it prints, which says where it listens.
func startDemo(t *testing.T, args ...string) *demoProc {
	t.Helper()
	cmd := exec.Command(idemBin, append([]string{"demo-upstream", "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &demoProc{cmd: cmd, lines: make(chan string, 100), done: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-d.done
		d.done <- err
	})
	var line string
	select {
	case line = <-first:
	case <-time.After(20 * time.Second):
		t.Fatal("idem demo-upstream printed nothing")
	}
	if strings.HasPrefix(line, "{") {
		var ev demoEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Event != "listening" || ev.URL == "" {
			t.Fatalf("first --json line %q: %v", line, err)
		}
		d.base = ev.URL
	} else {
		_, rest, ok := strings.Cut(line, "listening on ")
		if !ok {
			t.Fatalf("first line %q does not say where it listens", line)
		}
		d.base, _, _ = strings.Cut(rest, " ")
	}
	return d
}

// next returns the next line the demo printed.
func (d *demoProc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-d.lines:
		if !ok {
			t.Fatal("idem demo-upstream's output ended")
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("idem demo-upstream printed no line")
	}
	return ""
}

// The demo API charges on every POST, a retry with the same key included
// (it has no idempotency of its own: the proxy's to show), takes JSON and
// forms, refuses what is not a charge, lists and counts what it made,
// prints each charge, and stops cleanly on SIGTERM.
func TestDemoUpstream(t *testing.T) {
	t.Parallel()
	d := startDemo(t, "--json")
	a := send(t, "POST", d.base+"/charges", `"k"`, `{"amount": 5000, "currency": "EUR"}`)
	b := send(t, "POST", d.base+"/charges", `"k"`, `{"amount": 5000, "currency": "EUR"}`)
	wantCode(t, a, 201, "")
	wantCode(t, b, 201, "")
	var ca, cb demoCharge
	if err := json.Unmarshal([]byte(a.body), &ca); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b.body), &cb); err != nil {
		t.Fatal(err)
	}
	if ca.ID != "ch_1" || cb.ID != "ch_2" || ca.Amount != 5000 || ca.Currency != "EUR" || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("charges %+v %+v (%v), want ch_1 and ch_2 of 5000 EUR as JSON", ca, cb, a.header)
	}
	form := send(t, "POST", d.base+"/charges", "", url.Values{"amount": {"70"}, "currency": {"usd"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	wantCode(t, form, 201, "")
	if !strings.Contains(form.body, `"amount":70,"currency":"usd"`) {
		t.Fatalf("form charge: %s", form.body)
	}
	for _, bad := range []struct {
		body, ctype string
		status      int
	}{
		{`{"amount": 0, "currency": "EUR"}`, "application/json", 400},
		{`{"amount": 1.5, "currency": "EUR"}`, "application/json", 400},
		{`{"amount": 10, "currency": "EURO\n"}`, "application/json", 400},
		{`{"amount": 10}`, "application/json", 400},
		{`[1]`, "application/json", 400},
		{`amount=10&currency=EUR`, "text/plain", 415},
	} {
		r := send(t, "POST", d.base+"/charges", "", bad.body, "Content-Type", bad.ctype)
		if r.status != bad.status || !strings.Contains(r.body, `"invalid_request_error"`) {
			t.Errorf("%s %s: %d %s, want %d and an error", bad.ctype, bad.body, r.status, r.body, bad.status)
		}
	}
	if r := send(t, "GET", d.base+"/count", "", ""); r.status != 200 || r.body != "{\"count\":3}\n" {
		t.Fatalf("GET /count: %d %q, want {\"count\":3}", r.status, r.body)
	}
	var list struct {
		Data []demoCharge `json:"data"`
	}
	r := send(t, "GET", d.base+"/charges", "", "")
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Data) != 3 || list.Data[2].ID != "ch_3" {
		t.Fatalf("GET /charges: %s (%v)", r.body, err)
	}
	if r := send(t, "GET", d.base+"/refunds", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("GET /refunds: %d, want 404", r.status)
	}
	for i, id := range []string{"ch_1", "ch_2", "ch_3"} {
		var ev demoEvent
		if line := d.next(t); json.Unmarshal([]byte(line), &ev) != nil || ev.Event != "charge" || ev.Charge == nil || ev.Charge.ID != id || ev.Charges != i+1 {
			t.Fatalf("line %d: %q, want the charge %s", i+2, line, id)
		}
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("idem demo-upstream did not stop on SIGTERM")
	}
}

// Without --json it prints a sentence per charge; a taken address is a
// failure (exit 1), an argument a usage error (exit 2).
func TestDemoUpstreamText(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	wantCode(t, send(t, "POST", d.base+"/charges", "", `{"amount": 5000, "currency": "EUR"}`), 201, "")
	if line := d.next(t); line != "charge ch_1: 5000 EUR (charges made: 1)" {
		t.Fatalf("charge line %q", line)
	}
	addr := strings.TrimPrefix(d.base, "http://")
	if _, stderr, code := cli(t, "demo-upstream", "--listen", addr); code != exitFailure || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("on a taken address: exit %d, %s", code, stderr)
	}
	if _, _, code := cli(t, "demo-upstream", "extra"); code != exitUsage {
		t.Fatalf("with an argument: exit %d, want 2", code)
	}
}

// idem audit, counting the demo's charges through GET /count, fails the
// demo audited straight (it runs every retry again) and passes it behind
// the proxy: what docs/http.md says of idem demo-upstream.
func TestDemoUpstreamAudited(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	body := `{"amount":100,"currency":"EUR"}`
	out, stderr, code := cli(t, "audit", d.base, "--sandbox", "--path", "/charges", "--body-json", body,
		"--effects-url", d.base+"/count")
	if code != exitFindings || !strings.Contains(out, "replay          fail") {
		t.Fatalf("the demo audited straight: exit %d, want 3 with replay failed\n%s%s", code, out, stderr)
	}
	p := startProxy(t, "--scope-header", "X-User-Id", "--upstream", d.base, "--store", "memory://")
	out, stderr, code = cli(t, "audit", p.url(""), "--sandbox", "--path", "/charges", "--body-json", body,
		"--header", "X-User-Id=alice", "--as-a", "X-User-Id=alice", "--as-b", "X-User-Id=bob", "--effects-url", d.base+"/count")
	if code != exitOK || !strings.Contains(out, "effects: counted (effects-url)") || strings.Contains(out, " fail ") {
		t.Fatalf("the demo behind the proxy: exit %d, want 0 with effects counted\n%s%s", code, out, stderr)
	}
}
