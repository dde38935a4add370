package stripetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// idemBin is the idem binary, built once from ../../cmd/idem.
var idemBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idem-stripetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	idemBin = filepath.Join(dir, "idem")
	build := exec.Command("go", "build", "-o", idemBin, ".")
	build.Dir = filepath.Join("..", "..", "cmd", "idem")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build idem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireServices is IDEM_REQUIRE_SERVICES=1, as CI sets: a test that
// cannot run fails instead of skipping.
func requireServices() bool { return os.Getenv("IDEM_REQUIRE_SERVICES") == "1" }

// proxy is a running idem proxy.
type proxy struct {
	url string
	mu  sync.Mutex
	log strings.Builder
}

func (p *proxy) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

var listenRE = regexp.MustCompile(`msg="idem proxy listening" addr=(\S+)`)

// startProxy runs the built proxy with args, on a loopback port, with a
// memory store, until the test ends.
func startProxy(t *testing.T, args ...string) *proxy {
	t.Helper()
	cmd := exec.Command(idemBin, append([]string{"proxy", "--listen", "127.0.0.1:0", "--store", "memory://"}, args...)...)
	cmd.Dir = t.TempDir() // the spool directory lands there
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	ready := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.logs())
		}
	})
	select {
	case addr := <-ready:
		p.url = "http://" + addr
	case <-exited:
		t.Fatalf("the proxy exited before listening:\n%s", p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy did not start:\n%s", p.logs())
	}
	return p
}
