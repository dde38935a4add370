package testenv

import (
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay a test controls, between a client and a server on
// loopback: point the client at Addr, and Stall, Resume or Cut the link
// to make a fault happen exactly when the test wants it (a replication
// link that lags before a primary is killed, a connection cut in the
// middle of a write). It forwards bytes as they come, both ways.
type Relay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed by Resume; replaced by Stall
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	accepts int
}

// StartRelay listens on a free loopback port and relays every connection
// to target (host:port). It is closed when the test ends.
func StartRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay: listen: %v", err)
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}, resume: make(chan struct{})}
	close(r.resume)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's host:port, for the client to dial.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Port is the relay's port.
func (r *Relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Stall stops forwarding: bytes already read wait, and once the kernel's
// buffers fill both sides stop sending, as on a link that lost its
// route. Connections stay open. New connections are accepted and stalled
// too.
func (r *Relay) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stalled {
		r.stalled = true
		r.resume = make(chan struct{})
	}
}

// Resume forwards again what Stall held, and what follows.
func (r *Relay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled {
		r.stalled = false
		close(r.resume)
	}
}

// Cut closes every relayed connection at once, as a network fault that
// resets them does; the relay keeps accepting new ones.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

// Accepted returns how many connections the relay has accepted.
func (r *Relay) Accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepts
}

// Close stops the relay and closes every connection. Idempotent.
func (r *Relay) Close() {
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

func (r *Relay) accept() {
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
		if !r.track(c, s) {
			return
		}
		r.wg.Add(2)
		go r.pipe(s, c)
		go r.pipe(c, s)
	}
}

// track registers a relayed pair, unless the relay is closed.
func (r *Relay) track(c, s net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		s.Close()
		return false
	}
	r.accepts++
	r.conns[c], r.conns[s] = struct{}{}, struct{}{}
	return true
}

// gate blocks while the relay is stalled.
func (r *Relay) gate() {
	r.mu.Lock()
	ch := r.resume
	r.mu.Unlock()
	<-ch
}

// pipe copies src to dst through the gate, and closes both at the end.
func (r *Relay) pipe(dst, src net.Conn) {
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
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: the pair ends
		}
	}
}
