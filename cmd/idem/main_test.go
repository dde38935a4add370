package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// idemBin is the idem binary built once for the subprocess tests.
var idemBin string

func TestMain(m *testing.M) {
	if kind := os.Getenv(mcpFixtureEnv); kind != "" {
		os.Exit(serveMCPFixture(kind)) // the test binary as an MCP server on stdio, for tools-audit
	}
	dir, err := os.MkdirTemp("", "idem-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	idemBin = filepath.Join(dir, "idem")
	out, err := exec.Command("go", "build", "-o", idemBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build idem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the idem binary to completion.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(idemBin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// proc is a running proxy.
type proc struct {
	cmd   *exec.Cmd
	addr  string
	admin string
	mu    sync.Mutex
	log   bytes.Buffer
	done  chan error
	// exited is closed once the process has been waited for.
	exited chan struct{}
}

var addrRE = regexp.MustCompile(`msg="idem proxy (admin )?listening" addr=(\S+)`)

// startProxy starts the proxy binary and waits until it listens.
func startProxy(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(idemBin, append([]string{"proxy", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir() // the default spool directory lands there
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), exited: make(chan struct{})}
	ready := make(chan struct{})
	wantAdmin := strings.Contains(strings.Join(args, " "), "--admin")
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			if m := addrRE.FindStringSubmatch(line); m != nil {
				if m[1] != "" {
					p.admin = m[2]
				} else {
					p.addr = m[2]
				}
			}
			up := p.addr != "" && (!wantAdmin || p.admin != "")
			p.mu.Unlock()
			if up && !signalled {
				signalled = true
				close(ready)
			}
		}
		err := cmd.Wait()
		close(p.exited)
		p.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails harmlessly when it already exited
		<-p.exited
	})
	select {
	case <-ready:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("proxy exited before listening: %v\n%s", err, p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("proxy did not start\n%s", p.logs())
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) url(path string) string { return "http://" + p.addr + path }

// upstream is the API behind the proxy: it counts requests per path and
// reports each arrival.
type upstream struct {
	*httptest.Server
	hits    sync.Map // path → *atomic.Int64
	arrived chan string
}

func newTestUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *upstream {
	u := &upstream{arrived: make(chan string, 1024)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := u.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		u.arrived <- r.URL.Path
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count(path string) int64 {
	c, ok := u.hits.Load(path)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

type resp struct {
	status int
	header http.Header
	body   string
}

func send(t testing.TB, method, url, key, body string, hdr ...string) resp {
	t.Helper()
	r, err := trySend(method, url, key, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func trySend(method, url, key, body string, hdr ...string) (resp, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, string(b)}, err
}

func wantCode(t *testing.T, r resp, status int, typ string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if typ != "" && !strings.Contains(r.body, `#`+typ+`"`) {
		t.Fatalf("body %s is not a %s problem", r.body, typ)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}
