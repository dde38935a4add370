package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// post builds a JSON POST /charges request carrying key as its
// Idempotency-Key header.
func post(key idem.Key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idemhttp.HeaderName, idemhttp.FormatKeyHeader(key)) // `"order-42"`
	return r
}

// The same POST sent twice with the same Idempotency-Key: the handler runs
// once, and the second response is the recorded one, marked
// Idempotent-Replayed. The JSON members may come in another order: the body
// is fingerprinted in canonical form.
func Example() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	runs := 0
	charges := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++ // the effect: money moves
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ch_1"}`)
	})

	mw, err := idemhttp.New(engine, idemhttp.Config{
		// One namespace for every caller; a real server returns the
		// authenticated principal, so that keys are per principal.
		Scope: idemhttp.GlobalScope,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw.Handler(charges)

	for _, body := range []string{
		`{"amount": 5000, "currency": "EUR"}`,
		`{"currency": "EUR", "amount": 5000}`, // the client retried
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, post("order-42", body))
		fmt.Printf("%d replayed=%q %s\n", w.Code, w.Header().Get(idemhttp.ReplayedHeader), w.Body)
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 replayed="" {"id":"ch_1"}
	// 201 replayed="true" {"id":"ch_1"}
	// handler runs: 1
}

// Reusing a key for a different request is refused with 422 and an RFC 9457
// problem that names the JSON members that differ, never their values. The
// names come from digests keyed per scope; in the global scope, which any
// caller could use to test another's body field by field, none are named.
func Example_mismatch() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	mw, err := idemhttp.New(engine, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id")})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))

	first := post("order-42", `{"amount": 5000, "currency": "EUR"}`)
	first.Header.Set("X-User-Id", "user-1") // set by the gateway
	h.ServeHTTP(httptest.NewRecorder(), first)

	w := httptest.NewRecorder()
	retry := post("order-42", `{"amount": 5001, "currency": "EUR"}`)
	retry.Header.Set("X-User-Id", "user-1")
	h.ServeHTTP(w, retry)
	var p idemhttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println(p.Type == idemhttp.TypeKeyMismatch, p.Fields)
	// Output:
	// 422 application/problem+json
	// true [amount]
}

// A Retrier retries a POST only when it carries a key, and sends the same
// key on every attempt. Here the server sheds load on the first attempt
// with 503; ReleaseStatuses tells the middleware that a 503 means nothing
// was applied, so the key is released and the retry runs the handler.
func ExampleRetrier() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	var attempts atomic.Int32
	mw, err := idemhttp.New(engine, idemhttp.Config{
		Scope:           idemhttp.GlobalScope,
		ReleaseStatuses: []int{http.StatusServiceUnavailable},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged once, key %s", r.Header.Get(idemhttp.HeaderName))
	})))
	defer srv.Close()

	rt := &idemhttp.Retrier{Client: srv.Client(), MinBackoff: time.Millisecond}
	body := `{"amount": 5000, "currency": "EUR"}`

	// Without a key, a retry could charge twice: the request is refused
	// before it is sent.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
	_, err = rt.Do(req)
	fmt.Println(errors.Is(err, idemhttp.ErrUnsafeRetry))

	// With a key on the context, every attempt carries it.
	ctx := idemhttp.WithKey(context.Background(), "order-42")
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(b))
	fmt.Println("attempts:", attempts.Load())
	// Output:
	// true
	// 201 charged once, key "order-42"
	// attempts: 2
}

// A client that went away before its request was claimed gets
// request-cancelled with status 499, not a store error; nothing was run.
// (Nobody reads the answer; logs and metrics tell it apart from a failing
// server.)
func ExampleStatusClientClosedRequest() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()
	mw, err := idemhttp.New(engine, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Println("charged") }))
	ctx, hangUp := context.WithCancel(context.Background())
	hangUp() // the client left
	w := httptest.NewRecorder()
	h.ServeHTTP(w, post("order-42", `{"amount":5000}`).WithContext(ctx))
	var p idemhttp.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	fmt.Println(w.Code, p.Type == idemhttp.TypeRequestCancelled)
	// Output: 499 true
}

// Config.WriteTimeout bounds how long a client may take to accept each
// 64 KiB of a protected response. The outcome is recorded before the
// response is written, so a client that stops reading is given up on
// without changing it; EventClientGone reports it.
func ExampleConfig_writeTimeout() {
	var gone atomic.Int64
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventClientGone {
			gone.Add(1)
		}
	})
	engine, err := idem.New(memstore.New(), idem.Config{Observer: obs})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()
	_, err = idemhttp.New(engine, idemhttp.Config{Scope: idemhttp.GlobalScope, WriteTimeout: 10 * time.Second})
	fmt.Println(err, gone.Load())
	// Output: <nil> 0
}
