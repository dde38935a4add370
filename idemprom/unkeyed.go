package idemprom

import "github.com/prometheus/client_golang/prometheus"

// The results of an unkeyed request, the values of
// idem_unkeyed_requests_total's result label.
const (
	// UnkeyedForwarded: the request went on to the handler (the upstream)
	// unprotected; a retry of it runs again.
	UnkeyedForwarded = "forwarded"
	// UnkeyedRefused: the request was refused (400 key-missing) because
	// its route requires a key.
	UnkeyedRefused = "refused"
)

// UnkeyedRequests counts requests of a protected method (POST, PATCH, …)
// that arrived without an Idempotency-Key, as
// idem_unkeyed_requests_total{method,result}. Nothing protects such a
// request: a client or gateway that retries it runs its effect again. A
// rising count with result "forwarded" names a client that does not send
// keys; result "refused" one that is turned away for it.
//
// The engine never sees these requests, so no [idem.Observer] event
// reports them: the HTTP layer that decides a request is unkeyed counts
// it (the idem proxy does; a service using idemhttp's Optional rules can
// count them in a handler of its own).
type UnkeyedRequests struct {
	c *prometheus.CounterVec
}

// NewUnkeyedRequests registers idem_unkeyed_requests_total with reg.
func NewUnkeyedRequests(reg prometheus.Registerer) (*UnkeyedRequests, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idem_unkeyed_requests_total",
		Help: "Requests of a protected method that arrived without an Idempotency-Key, by method and result: forwarded (passed through unprotected: a retry runs again) or refused (400, a key is required).",
	}, []string{"method", "result"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return &UnkeyedRequests{c: c}, nil
}

// Init creates the series of each method with result at zero, so that
// they are exported, and alerts on their increase work, before the first
// unkeyed request arrives.
func (u *UnkeyedRequests) Init(result string, methods ...string) {
	for _, m := range methods {
		u.c.WithLabelValues(m, result)
	}
}

// Inc counts one unkeyed request of method with result ([UnkeyedForwarded]
// or [UnkeyedRefused]). method becomes a label value: pass only methods
// from a fixed set (those the rules protect), never one a client chose
// freely, so that the series stay few.
func (u *UnkeyedRequests) Inc(method, result string) {
	u.c.WithLabelValues(method, result).Inc()
}
