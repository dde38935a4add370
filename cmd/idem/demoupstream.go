package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDemoListen is where idem demo-upstream listens unless told
// otherwise: the upstream the README's quick start puts the proxy in
// front of.
const DefaultDemoListen = "127.0.0.1:8080"

// maxDemoBody bounds a charge request's body.
const maxDemoBody = 64 << 10

func init() {
	commands["demo-upstream"] = command{"serve a demo charge API without idempotency, to try the proxy in front of", cmdDemoUpstream}
}

// cmdDemoUpstream serves a small charge API with no idempotency of its
// own: every POST /charges makes a charge, retry or not. Behind idem proxy
// a retried request with the same key makes one; straight to it, two.
func cmdDemoUpstream(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("demo-upstream", "idem demo-upstream [--listen ADDR] [--json]",
		"Serve a demo charge API to put idem proxy in front of (the README's quick start).\n"+
			"It has no idempotency of its own: every POST /charges makes a new charge.\n"+
			"  POST /charges  amount (integer, minor units) and currency, as JSON or a form: 201 and the charge\n"+
			"  GET  /charges  the charges made, oldest first\n"+
			"  GET  /count    how many charges were made: {\"count\":N} (what idem audit --effects-url reads)\n"+
			"Each charge is printed as it is made. Records live in memory; SIGINT or SIGTERM stops it.",
		"idem demo-upstream --listen 127.0.0.1:8080")
	listen := f.String("listen", DefaultDemoListen, "address to listen on")
	asJSON := f.Bool("json", false, "print one JSON object a line: the address listened on, then each charge (see docs/cli.md)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return f.fail(err)
	}
	d := &demoUpstream{out: e.stdout, json: *asJSON}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	if d.json {
		d.printJSON(demoEvent{Event: "listening", Addr: addr, URL: "http://" + addr})
	} else {
		d.printf("idem demo-upstream: a charge API without idempotency, listening on http://%s (POST /charges, GET /charges, GET /count)\n", addr)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return f.fail(err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return f.fail(err)
	}
	return exitOK
}

// demoCharge is one charge the demo made, as its API answers it.
type demoCharge struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Created  int64  `json:"created"`
}

// demoEvent is one line of idem demo-upstream --json.
type demoEvent struct {
	Event   string      `json:"event"` // listening or charge
	Addr    string      `json:"addr,omitempty"`
	URL     string      `json:"url,omitempty"`
	Charge  *demoCharge `json:"charge,omitempty"`
	Charges int         `json:"charges,omitempty"` // how many charges were made so far
}

// demoUpstream is the demo's state: the charges made, in order.
type demoUpstream struct {
	out  io.Writer
	json bool

	mu      sync.Mutex
	charges []demoCharge
}

func (d *demoUpstream) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", d.create)
	mux.HandleFunc("GET /charges", func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		list := append([]demoCharge{}, d.charges...)
		d.mu.Unlock()
		demoJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		n := len(d.charges)
		d.mu.Unlock()
		demoJSON(w, http.StatusOK, map[string]int{"count": n})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		demoError(w, http.StatusNotFound, "no such endpoint: try POST /charges, GET /charges or GET /count")
	})
	return mux
}

// create makes a charge: every call, whatever key it carries.
func (d *demoUpstream) create(w http.ResponseWriter, r *http.Request) {
	amount, currency, status, msg := demoChargeRequest(w, r)
	if msg != "" {
		demoError(w, status, msg)
		return
	}
	d.mu.Lock()
	c := demoCharge{ID: "ch_" + strconv.Itoa(len(d.charges)+1), Object: "charge", Amount: amount, Currency: currency, Created: time.Now().Unix()}
	d.charges = append(d.charges, c)
	n := len(d.charges)
	// Printed under the lock, so that the lines come in the charges' order.
	if d.json {
		d.printJSON(demoEvent{Event: "charge", Charge: &c, Charges: n})
	} else {
		d.printf("charge %s: %d %s (charges made: %d)\n", c.ID, c.Amount, c.Currency, n)
	}
	d.mu.Unlock()
	w.Header().Set("Location", "/charges/"+c.ID)
	demoJSON(w, http.StatusCreated, c)
}

// demoChargeRequest reads amount and currency from a JSON or form body;
// msg says what is wrong with the request, with its status.
func demoChargeRequest(w http.ResponseWriter, r *http.Request) (amount int64, currency string, status int, msg string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDemoBody))
	if err != nil {
		return 0, "", http.StatusBadRequest, "cannot read the body: " + err.Error()
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var amountText string
	switch ct {
	case "application/json":
		var v struct {
			Amount   json.Number `json:"amount"`
			Currency string      `json:"currency"`
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return 0, "", http.StatusBadRequest, "the body is not a JSON object with amount and currency: " + err.Error()
		}
		amountText, currency = v.Amount.String(), v.Currency
	case "application/x-www-form-urlencoded", "":
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return 0, "", http.StatusBadRequest, "the body is not a form: " + err.Error()
		}
		amountText, currency = q.Get("amount"), q.Get("currency")
	default:
		return 0, "", http.StatusUnsupportedMediaType, "send amount and currency as application/json or application/x-www-form-urlencoded, not " + ct
	}
	amount, err = strconv.ParseInt(amountText, 10, 64)
	if err != nil || amount <= 0 {
		return 0, "", http.StatusBadRequest, fmt.Sprintf("amount must be a positive integer (minor units), got %q", amountText)
	}
	if !demoCurrency(currency) {
		return 0, "", http.StatusBadRequest, fmt.Sprintf("currency must be a three-letter code (e.g. EUR), got %q", currency)
	}
	return amount, currency, 0, ""
}

// demoCurrency reports whether s looks like an ISO 4217 code: three ASCII
// letters.
func demoCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

func (d *demoUpstream) printf(format string, a ...any) { fmt.Fprintf(d.out, format, a...) }

func (d *demoUpstream) printJSON(ev demoEvent) {
	b, _ := json.Marshal(ev) // a demoEvent always marshals
	fmt.Fprintf(d.out, "%s\n", b)
}

func demoJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v) // the demo's own values always marshal
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// demoError answers in the shape of Stripe's errors.
func demoError(w http.ResponseWriter, status int, msg string) {
	demoJSON(w, status, map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": msg}})
}
