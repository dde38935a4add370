package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// ErrUnsafeRetry reports a request the retry helper refuses: a method that
// is not idempotent by definition (POST, PATCH, …) without an
// Idempotency-Key. Retrying it could apply it twice. See [UnsafeRetryError].
var ErrUnsafeRetry = errors.New("idemhttp: refusing to retry a non-idempotent request without an Idempotency-Key")

// UnsafeRetryError says why a request was refused.
type UnsafeRetryError struct {
	Method string
	Reason string
}

func (e *UnsafeRetryError) Error() string {
	return fmt.Sprintf("idemhttp: refusing to retry %s request: %s", e.Method, e.Reason)
}

// Is reports ErrUnsafeRetry.
func (e *UnsafeRetryError) Is(target error) bool { return target == ErrUnsafeRetry }

// Retrier sends a request and retries it when that is safe: the method is
// idempotent by definition (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or the
// request carries an Idempotency-Key (header, or [WithKey] on its
// context). It refuses any other request before sending it, with an
// [*UnsafeRetryError]; send such requests once with a plain client. The key
// is sent unchanged on every attempt; the retrier never makes one up.
type Retrier struct {
	// Client sends each attempt. Its Transport should be a [Transport] when
	// keys come from the context; the Retrier sets the header itself
	// otherwise. Defaults to http.DefaultClient.
	Client *http.Client
	// MaxAttempts bounds the attempts, the first included. Defaults to 4.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential backoff with full
	// jitter between attempts. Default to 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps how long a Retry-After header may make the retrier
	// wait; a longer one ends the retries and returns the response.
	// Defaults to 30s.
	MaxRetryAfter time.Duration
	// Retryable decides whether an attempt's result is worth retrying.
	// Defaults to [DefaultRetryable].
	Retryable func(resp *http.Response, err error) bool
}

// DefaultRetryable retries transport errors (except a cancelled or expired
// context) and statuses 408, 409 with Retry-After (an in-flight duplicate),
// 425, 429, 500, 502, 503 and 504.
func DefaultRetryable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return resp.Header.Get("Retry-After") != ""
	}
	return false
}

// Do sends req, retrying as configured, and returns the last response (or
// error). req's body must be replayable: set GetBody (http.NewRequest does
// for in-memory bodies).
func (rt *Retrier) Do(req *http.Request) (*http.Response, error) {
	if err := checkRetrySafe(req); err != nil {
		return nil, err
	}
	client := rt.Client
	if client == nil {
		client = http.DefaultClient
	}
	ctx := req.Context()
	attempts := max(rt.MaxAttempts, 1)
	if rt.MaxAttempts == 0 {
		attempts = 4
	}
	for i := 0; ; i++ {
		r, err := rt.attempt(req, i)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(r)
		retry := rt.retryable(resp, err)
		if !retry || i+1 >= attempts {
			return resp, err
		}
		wait, ok := rt.delay(resp, i)
		if !ok {
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func checkRetrySafe(req *http.Request) error {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return &UnsafeRetryError{Method: req.Method, Reason: "its body cannot be replayed (set Request.GetBody)"}
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return nil
	}
	if req.Header.Get(HeaderName) != "" || KeyFrom(req.Context()) != "" {
		return nil
	}
	return &UnsafeRetryError{Method: req.Method, Reason: "the method is not idempotent and the request carries no Idempotency-Key, so a retry could apply it twice; attach a key with idemhttp.WithKey (or the header), or send it once without the retrier"}
}

// attempt prepares attempt i: a fresh body and the key header.
func (rt *Retrier) attempt(req *http.Request, i int) (*http.Request, error) {
	r := req.Clone(req.Context())
	if i > 0 && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("idemhttp: replay request body: %w", err)
		}
		r.Body = b
	}
	if k := KeyFrom(req.Context()); k != "" && r.Header.Get(HeaderName) == "" {
		r.Header.Set(HeaderName, FormatKeyHeader(k))
	}
	return r, nil
}

func (rt *Retrier) retryable(resp *http.Response, err error) bool {
	if rt.Retryable != nil {
		return rt.Retryable(resp, err)
	}
	return DefaultRetryable(resp, err)
}

// delay returns how long to wait before attempt i+1: Retry-After when the
// response has one (false when it exceeds MaxRetryAfter), else backoff with
// full jitter.
func (rt *Retrier) delay(resp *http.Response, i int) (time.Duration, bool) {
	minB, maxB, maxRA := rt.MinBackoff, rt.MaxBackoff, rt.MaxRetryAfter
	if minB <= 0 {
		minB = 100 * time.Millisecond
	}
	if maxB <= 0 {
		maxB = 5 * time.Second
	}
	if maxRA <= 0 {
		maxRA = 30 * time.Second
	}
	if resp != nil {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return d, d <= maxRA
		}
	}
	ceil := minB << min(i, 30)
	if ceil <= 0 || ceil > maxB {
		ceil = maxB
	}
	return rand.N(ceil) + 1, true
}

// parseRetryAfter parses delay-seconds or an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > 1<<31 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
