package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ScopeQuota bounds what one scope (one principal, see [Config.Scope])
// may start through a [Middleware], so that one caller cannot take every
// handler, or fill the store with records. A request over a quota is
// answered 429 with a [TypeScopeQuota] problem and Retry-After; its
// handler does not run and nothing of it is recorded.
//
// Quotas count only requests that would run their handler — a new key, or
// a key whose earlier attempt was released: a replay, a duplicate of a
// request in flight and a mismatch are answered as always, never refused
// by a quota. They are checked once the engine has claimed the key and
// before the handler runs; a refused request's claim is released at once,
// so a retry with the same key is a new request.
//
// Counts are kept in this process's memory, per Middleware: with several
// proxy or application instances each enforces its own quotas.
type ScopeQuota struct {
	// InFlight bounds how many requests of one scope run their handler at
	// once in this Middleware. 0: no bound.
	InFlight int
	// Rate bounds how many requests of one scope may start their handler
	// per Per (new keys per minute by default), as a token bucket holding
	// at most Rate: a burst of Rate is allowed, then one more every
	// Per/Rate. 0: no bound.
	Rate int
	// Per is Rate's period. Defaults to a minute.
	Per time.Duration
}

// ErrScopeQuota is matched (errors.Is) by the error a request refused by a
// [ScopeQuota] carries; see [*ScopeQuotaError].
var ErrScopeQuota = errors.New("idemhttp: scope quota exceeded")

// ScopeQuotaError says which quota refused a request.
type ScopeQuotaError struct {
	// Quota is "inflight" or "rate": the metric label of the quota.
	Quota string
	// Limit is the quota's bound; Per is the rate quota's period.
	Limit int
	Per   time.Duration
	// RetryAfter is when the request may be tried again.
	RetryAfter time.Duration
}

func (e *ScopeQuotaError) Error() string {
	if e.Quota == QuotaInFlight {
		return fmt.Sprintf("idemhttp: scope quota: %d requests of this scope are running already", e.Limit)
	}
	return fmt.Sprintf("idemhttp: scope quota: this scope started %d requests in the last %s", e.Limit, e.Per)
}

// Is reports ErrScopeQuota.
func (e *ScopeQuotaError) Is(target error) bool { return target == ErrScopeQuota }

// The quotas' names, as [ScopeQuotaError.Quota] and metrics give them.
const (
	QuotaInFlight = "inflight"
	QuotaRate     = "rate"
)

func (q *ScopeQuota) validate() error {
	var errs []error
	if q.InFlight < 0 {
		errs = append(errs, fmt.Errorf("idemhttp: Config.ScopeQuota.InFlight must not be negative, got %d", q.InFlight))
	}
	if q.Rate < 0 {
		errs = append(errs, fmt.Errorf("idemhttp: Config.ScopeQuota.Rate must not be negative, got %d", q.Rate))
	}
	if q.Per < 0 {
		errs = append(errs, fmt.Errorf("idemhttp: Config.ScopeQuota.Per must not be negative, got %s", q.Per))
	}
	if q.Per == 0 {
		q.Per = time.Minute
	}
	return errors.Join(errs...)
}

// ParseRate reads a rate as the proxy's --scope-quota-rate takes it:
// "N/min", "N/s" or "N/h", N a positive integer.
func ParseRate(s string) (n int, per time.Duration, err error) {
	num, unit, ok := cutLast(s, '/')
	if ok {
		per = map[string]time.Duration{"s": time.Second, "sec": time.Second, "min": time.Minute, "m": time.Minute, "h": time.Hour}[unit]
	}
	n, aerr := strconv.Atoi(num)
	if !ok || per == 0 || aerr != nil || n <= 0 {
		return 0, 0, fmt.Errorf("want N/min (or N/s, N/h) with N a positive integer, got %q", s)
	}
	return n, per, nil
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// quotas is a Middleware's quota state: in-flight counts and token
// buckets per scope. Memory is bounded by the scopes active within one
// period: a bucket idle for a whole period is full again, which is what
// an absent bucket means, so it is dropped; an in-flight count is
// dropped when it reaches zero.
type quotas struct {
	cfg   ScopeQuota
	now   func() time.Time
	retry time.Duration // Retry-After of the in-flight quota

	mu        sync.Mutex
	inFlight  map[string]int
	buckets   map[string]bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newQuotas(cfg ScopeQuota, retry time.Duration) *quotas {
	if cfg.InFlight == 0 && cfg.Rate == 0 {
		return nil
	}
	return &quotas{cfg: cfg, now: time.Now, retry: retry, inFlight: map[string]int{}, buckets: map[string]bucket{}}
}

// acquire admits one request of scope to run its handler, or says which
// quota refuses it. An admitted request calls done(scope) when its
// handler returned.
func (q *quotas) acquire(scope string) *ScopeQuotaError {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cfg.InFlight > 0 && q.inFlight[scope] >= q.cfg.InFlight {
		return &ScopeQuotaError{Quota: QuotaInFlight, Limit: q.cfg.InFlight, RetryAfter: q.retry}
	}
	if q.cfg.Rate > 0 {
		now := q.now()
		q.sweep(now)
		b, ok := q.buckets[scope]
		if !ok {
			b = bucket{tokens: float64(q.cfg.Rate), last: now}
		}
		b.tokens = min(float64(q.cfg.Rate), b.tokens+float64(q.cfg.Rate)*float64(now.Sub(b.last))/float64(q.cfg.Per))
		b.last = now
		if b.tokens < 1 {
			q.buckets[scope] = b
			wait := time.Duration((1 - b.tokens) * float64(q.cfg.Per) / float64(q.cfg.Rate))
			return &ScopeQuotaError{Quota: QuotaRate, Limit: q.cfg.Rate, Per: q.cfg.Per, RetryAfter: wait}
		}
		b.tokens--
		q.buckets[scope] = b
	}
	if q.cfg.InFlight > 0 {
		q.inFlight[scope]++
	}
	return nil
}

// done ends an admitted request of scope.
func (q *quotas) done(scope string) {
	if q.cfg.InFlight == 0 {
		return
	}
	q.mu.Lock()
	if n := q.inFlight[scope] - 1; n > 0 {
		q.inFlight[scope] = n
	} else {
		delete(q.inFlight, scope)
	}
	q.mu.Unlock()
}

// sweep drops, at most once per period, the buckets idle for a whole
// period (full again). Called with mu held.
func (q *quotas) sweep(now time.Time) {
	if now.Sub(q.lastSweep) < q.cfg.Per {
		return
	}
	q.lastSweep = now
	for s, b := range q.buckets {
		if now.Sub(b.last) >= q.cfg.Per {
			delete(q.buckets, s)
		}
	}
}

// size is how many scopes the quotas hold state for (tests).
func (q *quotas) size() (inFlight, buckets int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inFlight), len(q.buckets)
}

// quotaProblem is the 429 answered to a request refused by a quota.
func quotaProblem(err error) *Problem {
	var qe *ScopeQuotaError
	if !errors.As(err, &qe) {
		qe = &ScopeQuotaError{Quota: QuotaRate, RetryAfter: time.Second}
	}
	detail := fmt.Sprintf("this principal has %d requests running, the most this server runs at once for one principal; this one was not run: retry after the indicated delay", qe.Limit)
	if qe.Quota == QuotaRate {
		detail = fmt.Sprintf("this principal started %d new requests within %s, the most this server starts for one principal; this one was not run: retry after the indicated delay", qe.Limit, qe.Per)
	}
	p := problem(TypeScopeQuota, http.StatusTooManyRequests, "scope quota exceeded", detail)
	p.RetryAfter = retrySeconds(qe.RetryAfter)
	return p
}
