package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MariaDBServers starts mariadbd servers of a test's own on loopback
// ports the test names: a primary and its replicas, or Galera nodes. One
// data directory is made by mariadb-install-db (about a second) and
// copied for each server. Every server is killed, with the processes it
// started (SST scripts, rsync), and its files removed when the test ends.
//
// Each server has a database "test" and a user root@127.0.0.1 without a
// password. Running as root, the servers run as the mysql user (Galera's
// rsync state transfer refuses to write a root-owned directory).
type MariaDBServers struct {
	t       testing.TB
	bin     string // mariadbd
	root    string // temporary directory holding the template and the servers
	tmpl    string // the installed data directory servers are copied from
	runAs   string // --user for mariadbd, when running as root
	uid     int
	gid     int
	mu      sync.Mutex
	servers []*MariaDBServer
}

// MariaDBServer is one running mariadbd.
type MariaDBServer struct {
	Name string
	Port int
	Dir  string // data directory
	// DSN is a go-sql-driver DSN for root on the database "test".
	DSN string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // from Wait, once done is closed
	log  string
}

// NewMariaDBServers installs a data directory to start servers from.
// Without mariadbd and mariadb-install-db the test is skipped, or fails
// when IDEM_REQUIRE_SERVICES=1.
func NewMariaDBServers(t testing.TB) *MariaDBServers {
	t.Helper()
	svc := Service{Name: "mariadbd and mariadb-install-db binaries", Env: "PATH"}
	bin := lookBin("mariadbd", "/usr/sbin/mariadbd", "/usr/libexec/mariadbd", "/usr/local/mysql/bin/mariadbd")
	install := lookBin("mariadb-install-db", "/usr/bin/mariadb-install-db", "/usr/local/mysql/scripts/mariadb-install-db")
	if bin == "" || install == "" {
		svc.unavailable(t, "mariadbd or mariadb-install-db not found")
		return nil
	}
	root, err := os.MkdirTemp("", "idem-mdb-") // short: a socket path must fit in 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	m := &MariaDBServers{t: t, bin: bin, root: root, tmpl: filepath.Join(root, "template"), uid: -1, gid: -1}
	t.Cleanup(m.stopAll)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			svc.unavailable(t, "running as root and no mysql user to run mariadbd as: "+err.Error())
			return nil
		}
		m.runAs = "mysql"
		m.uid, _ = strconv.Atoi(u.Uid)
		m.gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(root, m.uid, m.gid); err != nil {
			t.Fatal(err)
		}
	}
	// Each server has a temporary directory of its own: in a shared /tmp,
	// concurrent installs were seen to lose each other's temporary tables.
	tmp := filepath.Join(root, "tmp-template")
	if err := m.mkdir(tmp); err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-defaults", "--datadir=" + m.tmpl, "--tmpdir=" + tmp, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve", "--innodb-log-file-size=4M"}
	if m.runAs != "" {
		args = append(args, "--user="+m.runAs)
	}
	out, err := exec.Command(install, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	// A database is a directory: every copy has "test" from the start.
	if err := m.mkdir(filepath.Join(m.tmpl, "test")); err != nil {
		t.Fatal(err)
	}
	return m
}

// mkdir makes a directory the servers' user owns.
func (m *MariaDBServers) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if m.uid >= 0 {
		return os.Chown(dir, m.uid, m.gid)
	}
	return nil
}

// lookBin finds name on PATH, or at the first of paths that exists.
func lookBin(name string, paths ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Start copies the installed data directory and starts a server named
// name on 127.0.0.1:port with args added to its command line (e.g.
// "--log-bin=mysql-bin", "--server-id=2"), and waits until it accepts
// connections. A Galera joiner accepts them only once its state transfer
// is done.
func (m *MariaDBServers) Start(name string, port int, args ...string) *MariaDBServer {
	m.t.Helper()
	dir := filepath.Join(m.root, name)
	if out, err := exec.Command("cp", "-a", m.tmpl, dir).CombinedOutput(); err != nil {
		m.t.Fatalf("copy the data directory for %s: %v\n%s", name, err, out)
	}
	s := &MariaDBServer{Name: name, Port: port, Dir: dir, log: filepath.Join(m.root, name+".err"),
		DSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", port)}
	tmp := filepath.Join(m.root, "tmp-"+name)
	if err := m.mkdir(tmp); err != nil {
		m.t.Fatal(err)
	}
	full := []string{"--no-defaults", "--datadir=" + dir, "--tmpdir=" + tmp, "--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(m.root, name+".sock"),
		"--pid-file=" + filepath.Join(m.root, name+".pid"), "--log-error=" + s.log,
		"--skip-name-resolve", "--innodb-log-file-size=4M", "--innodb-buffer-pool-size=32M",
		"--performance-schema=OFF"}
	if m.runAs != "" {
		full = append(full, "--user="+m.runAs)
	}
	full = append(full, args...)
	if err := m.launch(s, full); err != nil {
		m.t.Fatal(err)
	}
	return s
}

// launch starts s's process with args and waits for its port.
func (m *MariaDBServers) launch(s *MariaDBServer, args []string) error {
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("mariadbd %s: port %d is in use already", s.Name, s.Port)
	}
	cmd := exec.Command(m.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that Kill reaches the SST scripts it runs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd %s: %w", s.Name, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { s.err = cmd.Wait(); close(s.done) }()
	m.mu.Lock()
	m.servers = append(m.servers, s)
	m.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("mariadbd %s exited before it accepted connections (%v); its log:\n%s", s.Name, s.err, s.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd %s on %s did not come up: %v; its log:\n%s", s.Name, addr, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr is the server's host:port.
func (s *MariaDBServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Kill sends SIGKILL to the server and every process it started, and
// waits until the server has exited.
func (s *MariaDBServer) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Stall stops the server and the processes it started with SIGSTOP, as
// a node that hangs: its connections stay open and nothing answers until
// Resume.
func (s *MariaDBServer) Stall() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume continues a stalled server (SIGCONT).
func (s *MariaDBServer) Resume() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT) }

// Log returns the end of the server's error log.
func (s *MariaDBServer) Log() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(bytes.TrimSpace(b))
}

// stopAll kills every server and removes their files.
func (m *MariaDBServers) stopAll() {
	m.mu.Lock()
	servers := m.servers
	m.mu.Unlock()
	for _, s := range servers {
		s.Kill()
	}
	if m.t.Failed() {
		for _, s := range servers {
			if log := s.Log(); log != "" {
				m.t.Logf("mariadbd %s log (end):\n%s", s.Name, lastLines(log, 30))
			}
		}
	}
	_ = os.RemoveAll(m.root)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// GaleraProvider returns the path of the Galera library (libgalera_smm.so)
// after checking that rsync and wsrep_sst_rsync, which a joining node's
// state transfer runs, are on PATH. Without them the test is skipped, or
// fails when IDEM_REQUIRE_SERVICES=1.
func GaleraProvider(t testing.TB) string {
	t.Helper()
	svc := Service{Name: "Galera (libgalera_smm.so, rsync, wsrep_sst_rsync)", Env: "PATH"}
	lib := lookBin("libgalera_smm.so", "/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so",
		"/usr/lib64/galera-4/libgalera_smm.so", "/usr/lib64/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so")
	if lib == "" {
		svc.unavailable(t, "libgalera_smm.so not found")
		return ""
	}
	for _, b := range []string{"rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(b); err != nil {
			svc.unavailable(t, b+" not on PATH")
			return ""
		}
	}
	return lib
}
