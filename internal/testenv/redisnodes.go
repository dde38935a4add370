package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RedisNode is a redis-server (or a Sentinel) that a test started on a
// loopback port of its choosing, for setups that need fixed ports and
// processes the test kills and restarts: replicas, Sentinels, a Cluster
// with replicas. Its files live in a directory of its own, kept across a
// restart. It runs in a process group of its own, which is SIGKILLed
// when the test ends, whatever happened.
type RedisNode struct {
	Port int
	Dir  string

	t    testing.TB
	bin  string
	args []string
	proc serverProc
}

// StartRedisNode starts redis-server on 127.0.0.1:port with args added
// to its command line (e.g. "--replicaof", "127.0.0.1", "7300") and
// returns once it answers. The defaults are those of [StartRedis] (no
// save points, appendonly no), plus repl-diskless-sync-delay 0 so that a
// replica is in sync within moments. Without a redis-server binary on
// PATH the test is skipped, or fails when IDEM_REQUIRE_SERVICES=1.
func StartRedisNode(t testing.TB, port int, args ...string) *RedisNode {
	t.Helper()
	n := newRedisNode(t, port)
	n.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", n.Dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(n.Dir, "log"),
		"--repl-diskless-sync-delay", "0"}, args...)
	n.start()
	return n
}

// StartSentinel starts a Sentinel on 127.0.0.1:port that monitors the
// primary at masterAddr under name with quorum, and returns once it
// answers. conf holds more Sentinel directives, one a line, e.g.
// "sentinel down-after-milliseconds NAME 1000".
func StartSentinel(t testing.TB, port int, name, masterAddr string, quorum int, conf ...string) *RedisNode {
	t.Helper()
	n := newRedisNode(t, port)
	host, mport, err := net.SplitHostPort(masterAddr)
	if err != nil {
		t.Fatalf("sentinel: master address %q: %v", masterAddr, err)
	}
	lines := append([]string{
		"port " + strconv.Itoa(port), "bind 127.0.0.1", "dir " + n.Dir, "logfile " + filepath.Join(n.Dir, "log"),
		fmt.Sprintf("sentinel monitor %s %s %s %d", name, host, mport, quorum),
	}, conf...)
	path := filepath.Join(n.Dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.args = []string{path, "--sentinel"}
	n.start()
	return n
}

func newRedisNode(t testing.TB, port int) *RedisNode {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Service{Name: "redis-server binary", Env: "PATH"}.unavailable(t, err.Error())
		return nil
	}
	n := &RedisNode{Port: port, Dir: t.TempDir(), t: t, bin: bin}
	t.Cleanup(n.stop)
	return n
}

// Addr is the node's host:port.
func (n *RedisNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// PID is the running process's id (0 when it is not running).
func (n *RedisNode) PID() int { return n.proc.pid() }

// Log returns the end of the node's log file (up to 4 KiB), for failure
// messages.
func (n *RedisNode) Log() string { return logTail(n.Dir) }

// Kill SIGKILLs the node's process group and waits until it has exited.
func (n *RedisNode) Kill() { n.proc.kill() }

// Restart starts the killed node again with the same arguments and
// directory (its AOF, its cluster config, a Sentinel's rewritten
// configuration).
func (n *RedisNode) Restart() {
	n.t.Helper()
	n.Kill()
	n.start()
}

func (n *RedisNode) start() {
	n.t.Helper()
	cmd, done, err := n.proc.spawn(n.Dir, n.bin, n.args...)
	if err != nil {
		n.t.Fatalf("start redis-server on %d: %v", n.Port, err)
	}
	for i := 0; ; i++ {
		pid, err := serverPID(n.Addr())
		if err == nil && pid == cmd.Process.Pid {
			return
		}
		if err == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			n.t.Fatalf("port %d is taken by another server (pid %d), not the one this test started", n.Port, pid)
		}
		select {
		case <-done:
			n.t.Fatalf("redis-server on %d exited at start: %v\n%s", n.Port, err, n.Log())
		default:
		}
		if i == 200 {
			n.t.Fatalf("redis-server on %d did not come up: %v\n%s", n.Port, err, n.Log())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (n *RedisNode) stop() { n.Kill() }

// serverPID asks the server at addr for its process id (INFO server).
func serverPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0, err
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if i := strings.Index(string(got), "process_id:"); i >= 0 {
			if j := strings.IndexByte(string(got[i:]), '\r'); j >= 0 {
				return strconv.Atoi(string(got[i+len("process_id:") : i+j]))
			}
		}
		if err != nil {
			return 0, fmt.Errorf("no process_id in INFO server from %s: %w", addr, err)
		}
	}
}
