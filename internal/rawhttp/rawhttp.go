// Package rawhttp writes HTTP/1.1 requests on bare TCP connections, for
// tests of clients that misbehave: that stop reading, reset, or half-close
// before their body is sent. net/http's client can do none of these.
package rawhttp

import (
	"fmt"
	"net"
	"testing"
)

// Post writes a POST to path carrying the Idempotency-Key key and a JSON
// body on a new connection to addr, and returns the connection unread; it
// is closed when the test ends. contentLength < 0 declares the body's own
// length; a larger one leaves the body unfinished.
func Post(t testing.TB, addr, path, key, body string, contentLength int) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if contentLength < 0 {
		contentLength = len(body)
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, key, contentLength, body); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// Reset drops c with a TCP reset (RST) instead of an orderly close.
func Reset(t testing.TB, c *net.TCPConn) {
	t.Helper()
	if err := c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}
