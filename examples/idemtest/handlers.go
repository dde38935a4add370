package idemtestexample

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Ledger is the effect: charges appended to a list.
type Ledger struct {
	mu      sync.Mutex
	charges []string
}

// Charge appends a charge and returns its id.
func (l *Ledger) Charge(body []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charges = append(l.charges, string(body))
	return len(l.charges)
}

// Count returns how many charges were made.
func (l *Ledger) Count() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.charges) }

// App is the charge endpoint without any idempotency of its own.
func App(l *Ledger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := l.Charge(body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/charges/%d", id))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
}

// Correct is App behind idemhttp over e: the right way.
func Correct(l *Ledger) func(e *idem.Engine) (http.Handler, error) {
	return func(e *idem.Engine) (http.Handler, error) {
		mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.GlobalScope})
		if err != nil {
			return nil, err
		}
		return mw.Handler(App(l)), nil
	}
}

// CheckThenAct remembers answers by key itself: it looks the key up, runs
// the effect (which takes a while), then stores the answer. Broken: two
// requests with one key that arrive together both miss the lookup.
func CheckThenAct(l *Ledger) http.Handler {
	var mu sync.Mutex
	seen := map[string][]byte{}
	app := App(l)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idemhttp.HeaderName)
		mu.Lock()
		b, ok := seen[key]
		mu.Unlock()
		if ok {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(b)
			return
		}
		time.Sleep(50 * time.Millisecond) // the provider call
		rec := &capture{header: http.Header{}}
		app.ServeHTTP(rec, r)
		mu.Lock()
		seen[key] = rec.body
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(rec.body)
	})
}

// UUIDKey runs the effect through the engine, keyed by a fresh uuid per
// request instead of the client's Idempotency-Key. Broken: a retry is a new
// intent, so it charges again.
func UUIDKey(l *Ledger) func(e *idem.Engine) (http.Handler, error) {
	return engineHandler(l, func(*http.Request) string { return newUUID() }, true)
}

// NoFingerprint keys the effect by the client's Idempotency-Key but gives
// the engine no fingerprint. Broken: the same key with another body replays
// the first charge's answer instead of refusing.
func NoFingerprint(l *Ledger) func(e *idem.Engine) (http.Handler, error) {
	return engineHandler(l, func(r *http.Request) string { return r.Header.Get(idemhttp.HeaderName) }, false)
}

// engineHandler runs App through e by hand, keyed by key(r), with a
// fingerprint of the canonical body when fingerprint is set.
func engineHandler(l *Ledger, key func(*http.Request) string, fingerprint bool) func(e *idem.Engine) (http.Handler, error) {
	return func(e *idem.Engine) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			req := idem.Request{Key: idem.Key(key(r)), Operation: "charge"}
			if fingerprint {
				if req.Fingerprint, _, err = idem.FingerprintBody(r.Method, r.URL.Path, body, true); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
			}
			res, err := e.DoBytes(r.Context(), req, func(context.Context, *idem.Attempt) ([]byte, error) {
				return fmt.Appendf(nil, `{"id":%d}`, l.Charge(body)), nil
			})
			switch {
			case err == nil:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(res.Value)
			default:
				http.Error(w, err.Error(), http.StatusConflict)
			}
		}), nil
	}
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// capture keeps a handler's response body.
type capture struct {
	header http.Header
	body   []byte
}

func (c *capture) Header() http.Header         { return c.header }
func (c *capture) WriteHeader(int)             {}
func (c *capture) Write(p []byte) (int, error) { c.body = append(c.body, p...); return len(p), nil }
