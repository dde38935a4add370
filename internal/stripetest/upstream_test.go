package stripetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// stripeVersion is the API version the upstream answers with.
const stripeVersion = "2025-01-27.acacia"

// upstream is a Stripe-shaped charges API. POST /v1/charges takes a form
// (amount and currency required: 400 invalid_request_error otherwise, as
// Stripe answers a request that fails validation), charges — the effect,
// counted per metadata[order] as it arrives — then waits
// metadata[delay_ms] and answers the charge with Request-Id,
// Stripe-Version and the request's Idempotency-Key, as Stripe does.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	charges map[string]int           // metadata[order] → charges made
	keys    map[string][]string      // metadata[order] → Idempotency-Key of each arrival
	arrived map[string]chan struct{} // metadata[order] → a token per arrival
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{charges: map[string]int{}, keys: map[string][]string{}, arrived: map[string]chan struct{}{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		http.NotFound(w, r)
		return
	}
	_ = r.ParseForm()
	f := r.PostForm
	order := f.Get("metadata[order]")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Stripe-Version", stripeVersion)
	w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
	for _, p := range []string{"amount", "currency"} {
		if f.Get(p) == "" {
			w.Header().Set("Request-Id", "req_invalid_"+order)
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
				"type": "invalid_request_error", "code": "parameter_missing", "param": p,
				"message": "Missing required param: " + p + "."}})
			return
		}
	}
	u.mu.Lock()
	u.charges[order]++
	u.keys[order] = append(u.keys[order], r.Header.Get("Idempotency-Key"))
	n := 0
	for _, c := range u.charges {
		n += c
	}
	arrived := u.arrival(order)
	u.mu.Unlock()
	select {
	case arrived <- struct{}{}:
	default:
	}
	if ms, err := strconv.Atoi(f.Get("metadata[delay_ms]")); err == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	id := "ch_" + strconv.Itoa(n)
	w.Header().Set("Request-Id", "req_"+id)
	amount, _ := strconv.ParseInt(f.Get("amount"), 10, 64)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "charge", "amount": amount,
		"currency": f.Get("currency"), "metadata": map[string]string{"order": order}})
}

// effects is how many charges the upstream made for order.
func (u *upstream) effects(order string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.charges[order]
}

// arrival is order's arrival channel; u.mu must be held.
func (u *upstream) arrival(order string) chan struct{} {
	c, ok := u.arrived[order]
	if !ok {
		c = make(chan struct{}, 16)
		u.arrived[order] = c
	}
	return c
}

// waitArrival waits until a charge for order reached the upstream.
func (u *upstream) waitArrival(t *testing.T, order string) {
	t.Helper()
	u.mu.Lock()
	c := u.arrival(order)
	u.mu.Unlock()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Errorf("no charge for %s reached the upstream", order)
	}
}
