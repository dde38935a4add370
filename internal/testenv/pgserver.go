//go:build unix

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PostgreSQL servers of a test's own, for tests that kill and promote
// them (failover) or change their replication settings, which the shared
// server must never see. Each server lives in a scratch directory, listens
// on 127.0.0.1 on a port of PGPorts, and is killed (with its children)
// and removed when the test ends. PostgreSQL refuses to run as root: run
// as root, the servers run as the "postgres" user.

// PGPorts is the range of loopback ports test servers are started on
// (IDEM_TEST_PG_PORTS, "first-last"; defaults to 15400-15499). A port
// found taken is skipped.
var PGPorts = Service{Name: "PostgreSQL test server ports", Env: "IDEM_TEST_PG_PORTS", Default: "15400-15499"}

// PGBinDir is where PostgreSQL's server binaries (initdb, postgres,
// pg_basebackup, pg_ctl, pg_isready) are found: IDEM_TEST_PG_BIN, or the
// newest /usr/lib/postgresql/*/bin.
var PGBinDir = Service{Name: "PostgreSQL server binaries", Env: "IDEM_TEST_PG_BIN"}

// PGServer is a PostgreSQL server a test started.
type PGServer struct {
	// Port is the loopback port it listens on.
	Port int
	// Data is its data directory.
	Data string

	t     testing.TB
	bin   string
	base  string // scratch directory: data, socket, log
	cred  *syscall.Credential
	mu    sync.Mutex
	cmd   *exec.Cmd
	exit  chan struct{} // closed when the postmaster has exited
	dead  bool
	owner bool // removes base at cleanup
}

// pgBin returns the binaries' directory, or skips (fails) t.
func pgBin(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(PGBinDir.Env)
	if dir == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
		if len(dirs) > 0 {
			dir = dirs[len(dirs)-1]
		}
	}
	if dir == "" {
		PGBinDir.unavailable(t, "no /usr/lib/postgresql/*/bin")
		return ""
	}
	for _, b := range []string{"initdb", "postgres", "pg_basebackup", "pg_ctl", "pg_isready"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			PGBinDir.unavailable(t, err.Error())
			return ""
		}
	}
	return dir
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// pgCredential returns the credential to run the servers with: the
// postgres user's when running as root, else nil (the current user).
func pgCredential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		PGBinDir.unavailable(t, "running as root and there is no postgres user to run PostgreSQL as: "+err.Error())
		return nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// StartPostgres creates a new cluster (initdb, trust authentication, user
// postgres) and starts it with settings added to its command line (each
// "name=value", e.g. "synchronous_commit=local"). The server is killed
// and its files removed when t ends.
func StartPostgres(t testing.TB, settings ...string) *PGServer {
	t.Helper()
	s := newPGServer(t)
	s.owner = true
	if out, err := s.run("initdb", "-D", s.Data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale", "C"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.start(settings)
	return s
}

// StartStandby takes a base backup of p through addr (host:port: p's own
// address, or a relay in front of it) and starts it as a streaming
// standby (pg_basebackup -R) whose replication connection goes through
// addr with application_name name, with settings added to its command
// line. It returns once the standby accepts connections.
func (p *PGServer) StartStandby(t testing.TB, addr, name string, settings ...string) *PGServer {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("standby: %v", err)
	}
	s := newPGServer(t)
	s.owner = true
	conn := fmt.Sprintf("host=%s port=%s user=postgres application_name=%s", host, port, name)
	if out, err := s.run("pg_basebackup", "-D", s.Data, "-R", "-X", "stream", "-c", "fast", "-d", conn); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	s.start(settings)
	return s
}

func newPGServer(t testing.TB) *PGServer {
	t.Helper()
	s := &PGServer{t: t, bin: pgBin(t), cred: pgCredential(t)}
	base, err := os.MkdirTemp("", "idem-pg-")
	if err != nil {
		t.Fatalf("scratch directory: %v", err)
	}
	s.base, s.Data = base, filepath.Join(base, "data")
	if s.cred != nil {
		if err := os.Chown(base, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatalf("chown %s: %v", base, err)
		}
	}
	t.Cleanup(s.cleanup)
	return s
}

// run runs one of PostgreSQL's programs as the server's user.
func (s *PGServer) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.base
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGCONNECT_TIMEOUT=5")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd.CombinedOutput()
}

// start launches the postmaster on a free port of PGPorts and waits until
// it accepts connections, trying another port when the one it chose was
// taken meanwhile.
func (s *PGServer) start(settings []string) {
	s.t.Helper()
	tried := map[int]bool{}
	var last string
	for attempt := 0; attempt < 8; attempt++ {
		port := pgFreePort(s.t, tried)
		tried[port] = true
		ok, log := s.launch(port, settings)
		if ok {
			return
		}
		last = log
		if !strings.Contains(log, "could not bind") && !strings.Contains(log, "could not create lock file") &&
			!strings.Contains(log, "Address already in use") {
			break
		}
	}
	s.t.Fatalf("PostgreSQL did not start in %s:\n%s", s.Data, last)
}

// launch starts the postmaster on port and reports whether it came up,
// with its log when not.
func (s *PGServer) launch(port int, settings []string) (bool, string) {
	logPath := filepath.Join(s.base, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("server log: %v", err)
	}
	defer logf.Close()
	if s.cred != nil {
		_ = os.Chown(logPath, int(s.cred.Uid), int(s.cred.Gid))
	}
	args := []string{"-D", s.Data, "-c", "port=" + strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + s.base, "-c", "shared_buffers=16MB", "-c", "max_connections=60",
		"-c", "logging_collector=off"}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.base
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start postgres: %v", err)
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	s.mu.Lock()
	s.cmd, s.exit, s.dead, s.Port = cmd, exit, false, port
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exit:
			s.mu.Lock()
			s.dead = true
			s.mu.Unlock()
			b, _ := os.ReadFile(logPath)
			return false, string(b)
		default:
		}
		if out, err := s.run("pg_isready", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "1"); err == nil {
			return true, ""
		} else if len(out) > 0 {
			s.t.Logf("pg_isready: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Kill()
	b, _ := os.ReadFile(logPath)
	return false, "did not accept connections within 60s\n" + string(b)
}

// pgFreePort returns a port of PGPorts, not in tried, that was free a
// moment ago.
func pgFreePort(t testing.TB, tried map[int]bool) int {
	t.Helper()
	lo, hi, err := pgPortRange()
	if err != nil {
		t.Fatalf("%s=%q: %v", PGPorts.Env, PGPorts.URL(), err)
	}
	n := hi - lo + 1
	off := rand.IntN(n)
	for i := range n {
		p := lo + (off+i)%n
		if tried[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d for a PostgreSQL test server", lo, hi)
	return 0
}

func pgPortRange() (lo, hi int, err error) {
	a, b, ok := strings.Cut(PGPorts.URL(), "-")
	if !ok {
		return 0, 0, errors.New("write first-last, e.g. 15400-15499")
	}
	if lo, err = strconv.Atoi(a); err == nil {
		hi, err = strconv.Atoi(b)
	}
	if err == nil && (lo <= 0 || hi < lo || hi > 65535) {
		err = errors.New("not a port range")
	}
	return lo, hi, err
}

// Addr is the server's host:port.
func (s *PGServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// DSN is a postgres:// URL for the server's postgres database as the
// postgres superuser.
func (s *PGServer) DSN() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// Kill kills the server at once, as a machine that dies does: SIGKILL to
// the postmaster and to every process it started (each runs in a session
// of its own), so no backend finishes what it was doing. Idempotent.
func (s *PGServer) Kill() {
	s.mu.Lock()
	cmd, exit, dead := s.cmd, s.exit, s.dead
	s.dead = true
	s.mu.Unlock()
	if cmd == nil || dead {
		if exit != nil {
			<-exit
		}
		return
	}
	// Freeze the postmaster and every process it started (each runs in
	// a session of its own) first, so that none notices the others'
	// death and acts on it, then kill them all.
	pid := cmd.Process.Pid
	procs := []int{pid}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for seen := map[int]bool{pid: true}; ; {
		grew := false
		for _, c := range childPIDs(pid) {
			if !seen[c] {
				seen[c], grew = true, true
				procs = append(procs, c)
				_ = syscall.Kill(c, syscall.SIGSTOP)
			}
		}
		if !grew {
			break
		}
	}
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	<-exit
	for _, c := range procs[1:] {
		waitGone(c)
	}
}

// Restart starts a server that was killed again on its data directory,
// with settings added to its command line, and returns once it accepts
// connections: PostgreSQL recovers from its WAL first, keeping exactly
// what had reached the operating system. Its Port (and so Addr and DSN)
// may change.
func (s *PGServer) Restart(settings ...string) {
	s.t.Helper()
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if !dead {
		s.t.Fatalf("Restart of a running server (kill it first)")
	}
	s.start(settings)
}

// Promote ends the standby's recovery (pg_ctl promote) and returns once
// it accepts writes.
func (s *PGServer) Promote(t testing.TB) {
	t.Helper()
	if out, err := s.run("pg_ctl", "promote", "-D", s.Data, "-w", "-t", "60"); err != nil {
		t.Fatalf("pg_ctl promote: %v\n%s\n%s", err, out, s.Log())
	}
}

// Log returns the server's log so far.
func (s *PGServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.base, "server.log"))
	return string(b)
}

// cleanup kills the server and removes its files; the log's tail is
// shown when the test failed.
func (s *PGServer) cleanup() {
	s.Kill()
	if s.t.Failed() && s.cmd != nil {
		log := s.Log()
		if len(log) > 4000 {
			log = "…" + log[len(log)-4000:]
		}
		s.t.Logf("PostgreSQL log of the server on port %d:\n%s", s.Port, log)
	}
	if s.owner {
		_ = os.RemoveAll(s.base)
	}
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// zombie reports whether /proc/PID/stat content b is a zombie's.
func zombie(b []byte) bool {
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitGone waits (briefly) until pid no longer exists or is a zombie.
func waitGone(pid int) {
	for range 200 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if zombie(b) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
