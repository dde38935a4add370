package testenv

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// StartRedis starts a redis-server of the test's own on a free loopback
// port, with args added to its command line (e.g. "--maxmemory-policy",
// "allkeys-lru"), and returns its redis:// URL. The server's files live
// in a temporary directory; it is stopped when the test ends. Without a
// redis-server binary on PATH the test is skipped, or fails when
// IDEM_REQUIRE_SERVICES=1.
func StartRedis(t testing.TB, args ...string) string {
	t.Helper()
	url, _ := StartRedisProcess(t, args...)
	return url
}

// StartRedisProcess is [StartRedis], also returning the server's process,
// for tests that pause (SIGSTOP), resume or kill it.
func StartRedisProcess(t testing.TB, args ...string) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Service{Name: "redis-server binary", Env: "PATH"}.unavailable(t, err.Error())
		return "", nil
	}
	port := freePort(t)
	dir := t.TempDir()
	full := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""}, args...)
	cmd := exec.Command(bin, full...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server dies only once resumed
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitListening(addr, 100); err != nil {
		t.Fatalf("redis-server on %s did not come up: %v", addr, err)
	}
	return "redis://" + addr + "/0", cmd.Process
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
