// Package cardprovider is a fake card processor for the payments example
// and its tests. It applies charges and refunds by idempotency key and can be
// told to misbehave the way real providers do: answer slowly, apply a charge
// and drop the response, ignore idempotency keys, or hold a response until
// the test lets it go (to crash the caller in between).
//
// API (JSON):
//
//	POST /charges, POST /refunds   Idempotency-Key header; body {"amount","currency"}
//	                                → 201 {"id","key","kind","amount","currency","status","applied_at"}
//	GET  /entries/{key}             the entry for a key, or 404 (the reconcile lookup)
//	GET  /entries?since=RFC3339     every entry since a time (the reconcile listing)
package cardprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Entry is what the provider applied under one idempotency key.
type Entry struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Kind      string    `json:"kind"` // "charge" or "refund"
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"` // "applied"
	AppliedAt time.Time `json:"applied_at"`
}

// Provider is the fake processor. Its zero value is not usable; call New.
type Provider struct {
	mu         sync.Mutex
	entries    map[string]Entry
	order      []string
	calls      map[string]int // requests per key
	applied    map[string]int // applications per key (above 1 = double charge)
	idempotent bool
	delay      time.Duration
	drop       int
	hold       chan struct{} // when set, responses wait for it to close
	arrived    chan string   // receives the key of each held request
	working    int           // requests accepted and not yet applied
	idle       *sync.Cond    // signalled when working drops to 0
}

// New returns a well-behaved provider: idempotent, prompt, reliable.
func New() *Provider {
	p := &Provider{entries: map[string]Entry{}, calls: map[string]int{}, applied: map[string]int{}, idempotent: true}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// SetIdempotent says whether a repeated key returns the first result (true)
// or is applied again (false: a provider without idempotency support).
func (p *Provider) SetIdempotent(on bool) { p.mu.Lock(); p.idempotent = on; p.mu.Unlock() }

// SetDelay makes the provider take d before applying and answering.
func (p *Provider) SetDelay(d time.Duration) { p.mu.Lock(); p.delay = d; p.mu.Unlock() }

// DropResponses makes the next n requests apply and then close the
// connection without answering.
func (p *Provider) DropResponses(n int) { p.mu.Lock(); p.drop = n; p.mu.Unlock() }

// Hold makes requests block before applying until the returned release
// function is called; each held request's key is sent on Arrived. Held
// requests apply after release even if their caller is gone, as a provider
// that already accepted the work does.
func (p *Provider) Hold() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = make(chan struct{})
	p.arrived = make(chan string, 16)
	h := p.hold
	var once sync.Once
	return func() { once.Do(func() { close(h) }) }
}

// Arrived receives the key of each request that reached a Hold.
func (p *Provider) Arrived() <-chan string { p.mu.Lock(); defer p.mu.Unlock(); return p.arrived }

// Wait blocks until every request the provider accepted has been applied.
func (p *Provider) Wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.working > 0 {
		p.idle.Wait()
	}
}

// Calls returns how many requests carried key.
func (p *Provider) Calls(key string) int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls[key] }

// Applications returns how many times each key was applied; a value above
// 1 is a double charge.
func (p *Provider) Applications() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.applied))
	for k, n := range p.applied {
		out[k] = n
	}
	return out
}

// Handler serves the provider's API.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) { p.apply(w, r, "charge") })
	mux.HandleFunc("POST /refunds", func(w http.ResponseWriter, r *http.Request) { p.apply(w, r, "refund") })
	mux.HandleFunc("GET /entries/{key}", p.lookup)
	mux.HandleFunc("GET /entries", p.list)
	return mux
}

type request struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

func (p *Provider) apply(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.Header.Get("Idempotency-Key")
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || key == "" || req.Amount <= 0 {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.working++
	p.calls[key]++
	hold, arrived, delay := p.hold, p.arrived, p.delay
	drop := p.drop > 0
	if drop {
		p.drop--
	}
	p.mu.Unlock()
	if hold != nil {
		arrived <- key
		<-hold
	}
	time.Sleep(delay) // a slow provider finishes its work even if the caller gave up
	e := p.record(key, kind, req)
	if drop {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(e)
}

// record applies the request under key, or returns the first result for a
// repeated key when the provider is idempotent.
func (p *Provider) record(key, kind string, req request) Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.working--; p.working == 0 {
		p.idle.Broadcast()
	}
	if e, ok := p.entries[key]; ok && p.idempotent {
		return e
	}
	p.applied[key]++
	e := Entry{ID: fmt.Sprintf("%s_%d", kind, len(p.order)+1), Key: key, Kind: kind, Amount: req.Amount,
		Currency: req.Currency, Status: "applied", AppliedAt: time.Now().UTC()}
	if _, ok := p.entries[key]; !ok {
		p.order = append(p.order, key)
	}
	p.entries[key] = e
	return e
}

func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok { // HTTP/2: the closest thing to a lost answer
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func (p *Provider) lookup(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	e, ok := p.entries[r.PathValue("key")]
	p.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(e)
}

func (p *Provider) list(w http.ResponseWriter, r *http.Request) {
	since, _ := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
	p.mu.Lock()
	out := []Entry{}
	for _, k := range p.order {
		if e := p.entries[k]; !e.AppliedAt.Before(since) {
			out = append(out, e)
		}
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
