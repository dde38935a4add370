package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATSServerBin is where a test looks for a nats-server binary first; then
// NATSServerCache, then PATH.
var NATSServerBin = Service{"nats-server binary", "IDEM_NATS_SERVER", ""}

// NATSServerVersion is the version .ci/run installs (into
// NATSServerCache) when no recent enough nats-server is there.
const NATSServerVersion = "v2.11.17"

// NATSServerCache is the path .ci/run installs NATSServerVersion at:
// $HOME/.cache/idem-ci/nats-server-v2.11.17.
func NATSServerCache() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "idem-ci", "nats-server-"+NATSServerVersion)
}

// MinClusterNATSServer is the oldest nats-server a test may run a
// JetStream cluster on: older servers let two conditional updates win at
// one revision of a replicated key-value bucket (nats-server issue #4320;
// Debian's 2.9.10 does).
var MinClusterNATSServer = [3]int{2, 10, 19}

var natsVersionRe = regexp.MustCompile(`v?(\d+)\.(\d+)\.(\d+)`)

// NATSServerBinary returns the first nats-server binary found
// (IDEM_NATS_SERVER, NATSServerCache, PATH) at least as new as min, and
// its version. Without one the test is skipped, or fails when
// IDEM_REQUIRE_SERVICES=1, with a message that names what was found.
func NATSServerBinary(t testing.TB, min [3]int) (string, string) {
	t.Helper()
	var cands []string
	if p := os.Getenv(NATSServerBin.Env); p != "" {
		cands = append(cands, p)
	}
	cands = append(cands, NATSServerCache())
	if p, err := exec.LookPath("nats-server"); err == nil {
		cands = append(cands, p)
	}
	var seen []string
	for _, p := range cands {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		m := natsVersionRe.FindStringSubmatch(string(out))
		if m == nil {
			continue
		}
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		ver := fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
		if !versionBelow(v, min) {
			return p, ver
		}
		seen = append(seen, p+" is "+ver)
	}
	why := fmt.Sprintf("no nats-server %d.%d.%d or newer (found: %s); install one with: GOBIN=$HOME/.cache/idem-ci/bin-nats go install github.com/nats-io/nats-server/v2@%s && mv $HOME/.cache/idem-ci/bin-nats/nats-server %s",
		min[0], min[1], min[2], strings.Join(append(seen, "nothing else"), ", "), NATSServerVersion, NATSServerCache())
	NATSServerBin.unavailable(t, why)
	return "", ""
}

func versionBelow(v, min [3]int) bool {
	for i := range v {
		if v[i] != min[i] {
			return v[i] < min[i]
		}
	}
	return false
}

// NATSNode is one nats-server with JetStream that a test started on
// loopback ports of its own, its files in a directory kept across a
// restart. It runs in a process group of its own, SIGKILLed when the test
// ends.
type NATSNode struct {
	// Name is the server's name (server_name), as JetStream's cluster
	// information reports a stream's leader and replicas.
	Name string
	// Port is the client port; MonitorPort the HTTP monitoring port.
	Port, MonitorPort int
	Dir               string

	t    testing.TB
	bin  string
	conf string
	proc serverProc
}

// NATSCluster is a JetStream cluster of NATSNodes, routed to each other.
type NATSCluster struct {
	Nodes []*NATSNode
}

// URL is a nats:// URL listing every node, for a client that follows the
// cluster through the loss of any one.
func (c *NATSCluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "nats://" + strings.Join(addrs, ",")
}

// Node returns the node named name, or nil.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// StartNATSServer starts one nats-server with JetStream (file storage in
// the test's temporary directory) on a loopback port of its own, and
// returns once it reports healthy. The binary is NATSServerBinary's, at
// least MinClusterNATSServer.
func StartNATSServer(t testing.TB) *NATSNode {
	t.Helper()
	bin, _ := NATSServerBinary(t, MinClusterNATSServer)
	ports := freePorts(t, 2)
	n := newNATSNode(t, bin, "n0", ports[0], ports[1], "")
	n.start()
	n.waitHealthy()
	return n
}

// StartNATSCluster starts n nats-servers (n ≥ 3 for a quorum that
// survives one loss) with JetStream, file storage in the test's temporary
// directory, routed to each other on loopback ports of their own, named
// n0, n1, …, and returns once every one reports JetStream healthy. The
// binary is NATSServerBinary's, at least MinClusterNATSServer.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	bin, _ := NATSServerBinary(t, MinClusterNATSServer)
	ports := freePorts(t, 3*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(ports[3*i+2])
	}
	c := &NATSCluster{}
	for i := range n {
		cl := fmt.Sprintf("cluster { name: idemtest, listen: 127.0.0.1:%d, routes: [%s] }", ports[3*i+2], strings.Join(routes, ", "))
		c.Nodes = append(c.Nodes, newNATSNode(t, bin, "n"+strconv.Itoa(i), ports[3*i], ports[3*i+1], cl))
	}
	for _, nd := range c.Nodes {
		nd.start()
	}
	for _, nd := range c.Nodes {
		nd.waitHealthy()
	}
	return c
}

func newNATSNode(t testing.TB, bin, name string, port, mport int, cluster string) *NATSNode {
	t.Helper()
	n := &NATSNode{Name: name, Port: port, MonitorPort: mport, Dir: t.TempDir(), t: t, bin: bin}
	conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream { store_dir: %q }\n%s\n",
		name, port, mport, filepath.Join(n.Dir, "js"), cluster)
	n.conf = filepath.Join(n.Dir, "server.conf")
	if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

// Addr is the node's client host:port.
func (n *NATSNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// URL is the node's nats:// URL.
func (n *NATSNode) URL() string { return "nats://" + n.Addr() }

// Log returns the end of the node's log (up to 4 KiB).
func (n *NATSNode) Log() string { return logTail(n.Dir) }

// Kill SIGKILLs the node's process group and waits until it has exited.
func (n *NATSNode) Kill() { n.proc.kill() }

// Restart starts the killed node again with its configuration and files,
// and returns once it reports healthy.
func (n *NATSNode) Restart() {
	n.t.Helper()
	n.Kill()
	n.start()
	n.waitHealthy()
}

func (n *NATSNode) start() {
	n.t.Helper()
	if _, _, err := n.proc.spawn(n.Dir, n.bin, "-c", n.conf, "-l", filepath.Join(n.Dir, "log")); err != nil {
		n.t.Fatalf("start nats-server %s: %v", n.Name, err)
	}
}

// waitHealthy waits up to 60s for the node's /healthz to answer 200
// (JetStream up and, in a cluster, its meta group led).
func (n *NATSNode) waitHealthy() {
	n.t.Helper()
	n.proc.mu.Lock()
	done := n.proc.done
	n.proc.mu.Unlock()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.MonitorPort)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			n.t.Fatalf("nats-server %s exited at start\n%s", n.Name, n.Log())
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("nats-server %s not healthy within 60s (%s)\n%s", n.Name, last, n.Log())
}

// freePorts returns k distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, k int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, k)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}
