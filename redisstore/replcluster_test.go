package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/testenv"
)

// replCluster is a Redis Cluster of 3 masters with 1 replica each that a
// test started on its own ports (masters base..base+2, replicas
// base+3..base+5), cluster-node-timeout 2000 and appendonly yes. With
// links, each master announces a linkRelay in front of it: everyone
// (clients and its replica) reaches it through the relay, and the test
// can stall the replication connections alone.
type replCluster struct {
	masters, replicas []*testenv.RedisNode
	links             []*linkRelay // nil without links
	ids               []string     // the masters' node ids
}

// The slot ranges of the three masters.
var slotRanges = [3][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}

func startReplCluster(t *testing.T, base int, links bool) *replCluster {
	t.Helper()
	common := []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--cluster-config-file", "nodes.conf",
		"--appendonly", "yes", "--appendfsync", "everysec"}
	rc := &replCluster{}
	ctx := context.Background()
	for i := range 3 {
		args := common
		port := base + i
		if links {
			l := startLinkRelay(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			rc.links = append(rc.links, l)
			args = append(append([]string{}, common...), "--cluster-announce-port", strconv.Itoa(l.Port()),
				"--cluster-announce-bus-port", strconv.Itoa(port+10000))
		}
		rc.masters = append(rc.masters, testenv.StartRedisNode(t, port, args...))
	}
	for i := range 3 {
		rc.replicas = append(rc.replicas, testenv.StartRedisNode(t, base+3+i, common...))
	}
	for i, m := range rc.masters {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		if err := c.Do(ctx, "cluster", "addslotsrange", slotRanges[i][0], slotRanges[i][1]).Err(); err != nil {
			t.Fatal(err)
		}
		id, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		rc.ids = append(rc.ids, id)
		c.Close()
	}
	for _, n := range append(rc.masters[1:], rc.replicas...) {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if err := c.Do(ctx, "cluster", "meet", "127.0.0.1", rc.masters[0].Port).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, r := range rc.replicas {
		c := redis.NewClient(&redis.Options{Addr: r.Addr()})
		for {
			err := c.Do(ctx, "cluster", "replicate", rc.ids[i]).Err()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CLUSTER REPLICATE on %s: %v", r.Addr(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	for _, m := range rc.masters {
		replicaOnline(t, m.Addr(), 1)
	}
	for _, n := range append(append([]*testenv.RedisNode{}, rc.masters...), rc.replicas...) {
		waitClusterOK(t, n.Addr(), deadline)
	}
	return rc
}

// waitClusterOK waits until the node at addr reports cluster_state:ok
// and knows all six nodes.
func waitClusterOK(t *testing.T, addr string, deadline time.Time) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:6") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: cluster not ok: %v %s", addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seeds are addresses a client can start from: the masters as announced
// and the replicas.
func (rc *replCluster) seeds() []string {
	var s []string
	for i, m := range rc.masters {
		if rc.links != nil {
			s = append(s, rc.links[i].Addr())
		} else {
			s = append(s, m.Addr())
		}
	}
	for _, r := range rc.replicas {
		s = append(s, r.Addr())
	}
	return s
}

// client returns a cluster client as idem's DSN makes one
// (cluster_refresh=1s by default), with short timeouts.
func (rc *replCluster) client(t *testing.T, refresh time.Duration) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.seeds(), PoolSize: 32,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 3 * time.Second, WriteTimeout: time.Second, // 3s: claims and WAITs pipelined
		MaxRetries: 1, ClusterStateReloadInterval: refresh})
	t.Cleanup(func() { c.Close() })
	return c
}

// killMaster SIGKILLs master i, cuts its relay's connections (a dead
// host's connections do not linger), and waits until its replica is a
// master that reports cluster_state:ok; it returns the seconds taken.
func (rc *replCluster) killMaster(t *testing.T, i int) time.Duration {
	t.Helper()
	start := time.Now()
	rc.masters[i].Kill()
	if rc.links != nil {
		rc.links[i].Cut()
	}
	c := redis.NewClient(&redis.Options{Addr: rc.replicas[i].Addr()})
	defer c.Close()
	for {
		role, err := c.Do(context.Background(), "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			info, _ := c.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
				return time.Since(start)
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("replica %s not promoted 30s after its master died: %v %v\n%s", rc.replicas[i].Addr(), role, err, rc.replicas[i].Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// linkRelay is a TCP relay in front of a Cluster master that tells the
// replication connections (the replica's, which says REPLCONF) from the
// clients' and stalls only them: testenv.Relay stalls a whole link, but
// a master announces one address, used by its replica and its clients
// alike.
type linkRelay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{}
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func startLinkRelay(t *testing.T, target string) *linkRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &linkRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}, resume: make(chan struct{})}
	close(r.resume)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *linkRelay) Addr() string { return r.ln.Addr().String() }
func (r *linkRelay) Port() int    { return r.ln.Addr().(*net.TCPAddr).Port }

// Stall holds the replication connections' bytes, both ways, until Resume.
func (r *linkRelay) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stalled {
		r.stalled = true
		r.resume = make(chan struct{})
	}
}

// Resume forwards what Stall held.
func (r *linkRelay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled {
		r.stalled = false
		close(r.resume)
	}
}

// Cut closes every connection; what a stall held is dropped.
func (r *linkRelay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

func (r *linkRelay) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	if r.stalled {
		r.stalled = false
		close(r.resume)
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

func (r *linkRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		r.conns[c], r.conns[s] = struct{}{}, struct{}{}
		r.mu.Unlock()
		lk := &relayedConn{}
		r.wg.Add(2)
		go r.pipe(s, c, lk, true)
		go r.pipe(c, s, lk, false)
	}
}

// relayedConn is one relayed connection: repl once its client said
// REPLCONF.
type relayedConn struct {
	mu   sync.Mutex
	repl bool
}

func (lk *relayedConn) isRepl() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.repl
}

// gate blocks while the relay is stalled.
func (r *linkRelay) gate() {
	r.mu.Lock()
	ch := r.resume
	r.mu.Unlock()
	<-ch
}

// pipe copies src to dst; sniff looks for REPLCONF in what a client sends
// (a replica sends it in its handshake, before PSYNC).
func (r *linkRelay) pipe(dst, src net.Conn, lk *relayedConn, sniff bool) {
	defer r.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		r.mu.Lock()
		delete(r.conns, dst)
		delete(r.conns, src)
		r.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	var seen int
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if sniff && seen < 4096 {
				seen += n
				if bytes.Contains(bytes.ToUpper(buf[:n]), []byte("REPLCONF")) {
					lk.mu.Lock()
					lk.repl = true
					lk.mu.Unlock()
				}
			}
			if lk.isRepl() {
				r.gate()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// keysOnMaster returns n keys of the store whose records live on master
// i (by slot).
func (rc *replCluster) keysOnMaster(t *testing.T, c *redis.ClusterClient, s *Store, i, n int) []string {
	t.Helper()
	var keys []string
	for k := 0; len(keys) < n && k < 100*n; k++ {
		key := fmt.Sprint("w", k)
		slot, err := c.ClusterKeySlot(context.Background(), s.recKey("failover", key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot) >= slotRanges[i][0] && int(slot) <= slotRanges[i][1] {
			keys = append(keys, key)
		}
	}
	return keys
}

// keysOf reports, for each intent of l, whether its record lives on
// master i.
func (rc *replCluster) keysOf(t *testing.T, s *Store, l *failoverLoad, i int) []bool {
	t.Helper()
	on := make([]bool, len(l.effects))
	for k := range on {
		slot, err := s.cluster.ClusterKeySlot(context.Background(), s.recKey("failover", fmt.Sprint("k", k))).Result()
		if err != nil {
			t.Fatal(err)
		}
		on[k] = int(slot) >= slotRanges[i][0] && int(slot) <= slotRanges[i][1]
	}
	return on
}
