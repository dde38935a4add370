package idemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
)

// t stands for the *testing.T of a test function in these examples.
var t = &idemtest.Recorder{}

// A handler built on idemhttp, given to idemtest as a Built so that every
// check runs, effects counted by the application's own ledger.
func ExampleHTTP() {
	var charges atomic.Int64
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, id)
	})
	idemtest.HTTP(t, &idemtest.Built{
		Build: func(e *idem.Engine) (http.Handler, error) {
			mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.GlobalScope})
			if err != nil {
				return nil, err
			}
			return mw.Handler(app), nil
		},
	}, idemtest.Case{
		Path:    "/charges",
		Body:    `{"amount":100,"currency":"EUR"}`,
		Effects: func() int { return int(charges.Load()) },
	})
	fmt.Println("failures:", len(t.All()))
	// Output: failures: 0
}

// An operation run by an engine; without Effects, idemtest counts the
// calls of the operation.
func ExampleOp() {
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	charge := func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		return []byte("charged " + a.ForwardKey()), nil
	}
	idemtest.Op(t, e, charge, idemtest.OpCase{
		Request: idem.Request{
			Operation:   "charge",
			Fingerprint: idem.NewFingerprint([]byte("order-42"), []byte("100 EUR")),
		},
		Checks: []idemtest.Check{idemtest.Replay, idemtest.Divergence, idemtest.Concurrency},
	})
	fmt.Println("failures:", len(t.All()))
	// Output: failures: 0
}

// A Recorder keeps the failures, so a test can show that idemtest catches
// a handler that runs its effect on every request.
func ExampleRecorder() {
	var charges atomic.Int64
	noDedup := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"charge":%d}`, charges.Add(1))
	})
	rec := &idemtest.Recorder{}
	idemtest.HTTP(rec, noDedup, idemtest.Case{
		Body:    `{"amount":100}`,
		Effects: func() int { return int(charges.Load()) },
		Checks:  []idemtest.Check{idemtest.Replay},
	})
	fmt.Println("replay caught:", len(rec.Failures(idemtest.Replay)) > 0)
	// Output: replay caught: true
}
