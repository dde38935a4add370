package audit

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// reply is one response, read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r *reply) ok() bool { return r.status >= 200 && r.status < 300 }
func (r *reply) replayed() bool {
	return strings.EqualFold(r.header.Get(idemhttp.ReplayedHeader), "true")
}

// sameAs reports whether r is the same answer as first: the same status
// and an equivalent body (see [equivalentBody]). A replay mark
// (Idempotent-Replayed: true) does not make a different body the same
// answer: a client that retried gets what the replay says, and an answer
// with another charge id is another charge as far as it can tell.
func (r *reply) sameAs(first *reply) bool {
	return r.status == first.status && equivalentBody(r.body, first.body)
}

// equivalentBody reports whether two answer bodies say the same thing:
// byte for byte, or, when both are JSON, the same document — the same
// members with the same values, in any order and spacing, numbers compared
// as written (1.0 is not 1). Nothing in a body is ignored: a field that
// differs between a first answer and its replay (a request id, a time) is
// a difference.
func equivalentBody(a, b string) bool {
	if a == b {
		return true
	}
	da, okA := decodeJSON(a)
	db, okB := decodeJSON(b)
	return okA && okB && reflect.DeepEqual(da, db)
}

// decodeJSON decodes one JSON value, keeping numbers as written.
func decodeJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false // something after the value
	}
	return v, true
}

func (r *reply) String() string {
	s := fmt.Sprintf("%d %s", r.status, clipText(r.body))
	if r.replayed() {
		s += " (" + idemhttp.ReplayedHeader + ": true)"
	}
	return s
}

func clipText(s string) string {
	if len(s) > 120 {
		return strconv.Quote(s[:120]) + "…"
	}
	return strconv.Quote(s)
}

// errBudget: the request budget would be exceeded.
var errBudget = errors.New("request budget (--max-requests) reached")

// reserve checks that n more requests fit in the budget.
func (a *Auditor) reserve(n int) error {
	if int(a.sent.Load())+n > a.o.MaxRequests {
		return errBudget
	}
	return nil
}

func (a *Auditor) take(ctx context.Context) error {
	if a.sent.Add(1) > int64(a.o.MaxRequests) {
		a.sent.Add(-1)
		return errBudget
	}
	return a.rate.wait(ctx)
}

// keyNone sends no Idempotency-Key header.
const keyNone = "\x00none"

func (a *Auditor) newKey(probe string) string { return "idem-audit-" + a.run1 + "-" + probe }

// send sends the mutating request with key (keyNone: no header) and body,
// with extra headers.
func (a *Auditor) send(ctx context.Context, key, body string, extra ...[2]string) (*reply, error) {
	if err := a.take(ctx); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, a.o.Method, a.target, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = a.header.Clone()
	for _, h := range extra {
		req.Header.Set(h[0], h[1])
	}
	if key != keyNone {
		req.Header.Set(idemhttp.HeaderName, key)
	}
	res, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &reply{status: res.StatusCode, header: res.Header, body: string(b)}, nil
}

// sendRaw writes the request on a connection of its own, so that a key
// net/http refuses to send (a control character) reaches the server.
func (a *Auditor) sendRaw(ctx context.Context, key string) (*reply, error) {
	if err := a.take(ctx); err != nil {
		return nil, err
	}
	u, _ := url.Parse(a.target)
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	d := &net.Dialer{Timeout: a.o.Timeout}
	var conn net.Conn
	var err error
	if u.Scheme == "https" {
		conn, err = (&tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: u.Hostname()}}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(a.o.Timeout))
	req, err := http.NewRequest(a.o.Method, a.target, strings.NewReader(a.body))
	if err != nil {
		return nil, err
	}
	req.Header = a.header.Clone()
	req.Header.Set(idemhttp.HeaderName, key)
	req.Close = true
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return &reply{status: res.StatusCode, header: res.Header, body: string(b)}, nil
}

func (a *Auditor) noteError(probe string, r *reply) {
	if r != nil && r.status >= 400 {
		a.mu.Lock()
		a.errAns = append(a.errAns, probeAnswer{probe, r})
		a.mu.Unlock()
	}
}

// limiter spaces requests to at most rate a second (0: no limit).
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return &limiter{}
	}
	return &limiter{interval: time.Duration(float64(time.Second) / rate)}
}

func (l *limiter) wait(ctx context.Context) error {
	if l.interval == 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	select {
	case <-time.After(time.Until(at)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
