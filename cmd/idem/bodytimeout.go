package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// DefaultBodyTimeout is how long the proxy waits for a request body to
// arrive in full (--body-timeout).
const DefaultBodyTimeout = 30 * time.Second

// bodyDeadline reads each request's body, up to max+1 bytes (a larger one
// is the middleware's 413), within timeout of the handler's start, before
// anything is claimed: a client that stalls in the middle of its body gets
// 408 and its connection closed, rather than holding a goroutine and a
// connection for as long as it likes. The body read is handed on in
// memory; the read deadline is lifted for the rest of the exchange. A
// timeout of 0 turns it off.
func bodyDeadline(next http.Handler, timeout time.Duration, max int64) http.Handler {
	if timeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength > max {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			next.ServeHTTP(w, r) // a connection that cannot take deadlines
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		if timedOut(err) {
			w.Header().Set("Connection", "close")
			idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.TypeBodyUnreadable, Title: "request body timeout", Status: http.StatusRequestTimeout,
				Detail: fmt.Sprintf("the request body did not arrive in full within %s; nothing was claimed and it may be retried with the same key", timeout)})
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		_ = r.Body.Close()
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errorReader{err}))
		next.ServeHTTP(w, r)
	})
}

// timedOut reports a read that passed its deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// errorReader returns err (io.EOF when nil) on every read: what the body
// read ended with, handed on after the bytes read.
type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}
