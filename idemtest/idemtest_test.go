package idemtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
)

// wantOnly asserts that only check c failed in rec, with a message
// containing each of want.
func wantOnly(t *testing.T, rec *idemtest.Recorder, c idemtest.Check, want ...string) {
	t.Helper()
	got := rec.Failures(c)
	if len(got) == 0 {
		t.Fatalf("check %s did not fail; failures: %q", c, rec.All())
	}
	if len(got) != len(rec.All()) {
		t.Errorf("other checks failed too: %q", rec.All())
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("%s failure lacks %q:\n%s", c, w, strings.Join(got, "\n"))
		}
	}
}

// app is a handler whose effect is counted: it appends to a ledger.
type app struct{ n atomic.Int64 }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := a.n.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/charges/%d", id))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d,"request":%s}`, id, body)
}

func (a *app) count() int { return int(a.n.Load()) }

// protected builds app behind idemhttp over e.
func protected(a http.Handler) func(e *idem.Engine) (http.Handler, error) {
	return func(e *idem.Engine) (http.Handler, error) {
		mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.GlobalScope})
		if err != nil {
			return nil, err
		}
		return mw.Handler(a), nil
	}
}

const body = `{"amount":100,"currency":"EUR"}`

func TestHTTPPassesCorrectHandler(t *testing.T) {
	a := &app{}
	idemtest.HTTP(t, &idemtest.Built{Build: protected(a), Config: idem.Config{Lease: time.Second}},
		idemtest.Case{Path: "/charges", Body: body, Effects: a.count})
}

func TestHTTPPlainHandlerGetsOutsideChecks(t *testing.T) {
	a := &app{}
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := protected(a)(e)
	if err != nil {
		t.Fatal(err)
	}
	idemtest.HTTP(t, h, idemtest.Case{Path: "/charges", Body: body, Effects: a.count})
}

func TestReplayFailsWithoutDeduplication(t *testing.T) {
	a := &app{}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, a, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Replay}})
	wantOnly(t, f, idemtest.Replay, "twice", "want the second answer identical", "the effect ran 2 time(s)", "fix: run the effect through idem")
}

func TestReplayFailsOnAnswerWithoutEffects(t *testing.T) {
	a := &app{}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, a, idemtest.Case{Path: "/charges", Body: body, Checks: []idemtest.Check{idemtest.Replay}})
	wantOnly(t, f, idemtest.Replay, `\"id\":1`, `\"id\":2`)
}

// rawHash is a Built handler over the engine that fingerprints the body's
// bytes (so a reordered JSON body is another request) or, with zero, not
// at all.
func rawHash(a http.Handler, zero bool) func(e *idem.Engine) (http.Handler, error) {
	return func(e *idem.Engine) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var fp idem.Fingerprint
			if !zero {
				fp = idem.NewFingerprint(b)
			}
			res, err := e.DoBytes(r.Context(), idem.Request{Key: idem.Key(r.Header.Get("Idempotency-Key")), Fingerprint: fp},
				func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
					rec := &bodyOnly{h: http.Header{}}
					r2 := r.Clone(ctx)
					r2.Body = io.NopCloser(strings.NewReader(string(b)))
					a.ServeHTTP(rec, r2)
					return rec.b, nil
				})
			switch {
			case err == nil:
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(res.Value)
			case strings.Contains(err.Error(), "different request"):
				w.WriteHeader(http.StatusUnprocessableEntity)
			default:
				w.WriteHeader(http.StatusConflict)
			}
		}), nil
	}
}

type bodyOnly struct {
	h http.Header
	b []byte
}

func (b *bodyOnly) Header() http.Header         { return b.h }
func (b *bodyOnly) WriteHeader(int)             {}
func (b *bodyOnly) Write(p []byte) (int, error) { b.b = append(b.b, p...); return len(p), nil }

func TestDivergenceFailsWithoutFingerprint(t *testing.T) {
	a := &app{}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, &idemtest.Built{Build: rawHash(a, true)}, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Divergence}})
	wantOnly(t, f, idemtest.Divergence, "idem_changed", "second got HTTP 201", "want a refusal (HTTP 422", "fix: fingerprint the request")
}

func TestDivergenceFailsOnByteFingerprint(t *testing.T) {
	a := &app{}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, &idemtest.Built{Build: rawHash(a, false)}, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Divergence}})
	wantOnly(t, f, idemtest.Divergence, "want a replay: the same JSON document with its members reordered", "second: HTTP 422")
}

// checkThenAct looks the key up, runs the effect, then stores the answer.
type checkThenAct struct {
	app
	mu   sync.Mutex
	seen map[string][]byte
}

func (c *checkThenAct) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	c.mu.Lock()
	b, ok := c.seen[key]
	c.mu.Unlock()
	if ok {
		_, _ = w.Write(b)
		return
	}
	time.Sleep(50 * time.Millisecond) // the effect takes time
	rec := &bodyOnly{h: http.Header{}}
	c.app.ServeHTTP(rec, r)
	c.mu.Lock()
	c.seen[key] = rec.b
	c.mu.Unlock()
	_, _ = w.Write(rec.b)
}

func TestConcurrencyFailsOnCheckThenAct(t *testing.T) {
	c := &checkThenAct{seen: map[string][]byte{}}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, c, idemtest.Case{Path: "/charges", Body: body, Effects: c.count, Concurrency: 8, Checks: []idemtest.Check{idemtest.Concurrency}})
	wantOnly(t, f, idemtest.Concurrency, "8 times at once", "want exactly 1", "check-then-act")
}

// opEffect counts its calls.
func opEffect(n *atomic.Int64) idem.Handler {
	return func(context.Context, *idem.Attempt) ([]byte, error) {
		return []byte(fmt.Sprintf("charge %d", n.Add(1))), nil
	}
}

func opRequest() idem.Request {
	return idem.Request{Operation: "charge", Fingerprint: idem.NewFingerprint([]byte("charge 100 EUR"))}
}

func TestOpPassesCorrectOperation(t *testing.T) {
	e, err := idem.New(memstore.New(), idem.Config{Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var n atomic.Int64
	idemtest.Op(t, e, opEffect(&n), idemtest.OpCase{Request: opRequest()})
}

func TestOpDivergenceFailsOnZeroFingerprint(t *testing.T) {
	e, _ := idem.New(memstore.New(), idem.Config{})
	defer e.Close()
	var n atomic.Int64
	f := &idemtest.Recorder{}
	idemtest.Op(f, e, opEffect(&n), idemtest.OpCase{Request: idem.Request{Operation: "charge"}, Checks: []idemtest.Check{idemtest.Divergence}})
	wantOnly(t, f, idemtest.Divergence, "Request.Fingerprint is zero")
}

func TestCrashFailsOnRedrivableClaim(t *testing.T) {
	e, _ := idem.New(memstore.New(), idem.Config{Lease: time.Second})
	defer e.Close()
	var n atomic.Int64
	req := opRequest()
	req.Policy.Redrivable = true // a provider that does not deduplicate
	f := &idemtest.Recorder{}
	idemtest.Op(f, e, opEffect(&n), idemtest.OpCase{Request: req, Checks: []idemtest.Check{idemtest.Crash}})
	wantOnly(t, f, idemtest.Crash, "the process died during the effect", "want unknown", "ran the effect again", "fix: do not declare Policy.Redrivable")
}

func TestCrashFailsOnHandlerThatReleases(t *testing.T) {
	a := &app{}
	// ReleaseStatuses 201: the handler's success frees the key instead of
	// recording the answer, so a duplicate runs the effect again.
	build := func(e *idem.Engine) (http.Handler, error) {
		mw, err := idemhttp.New(e, idemhttp.Config{Scope: idemhttp.GlobalScope, ReleaseStatuses: []int{http.StatusCreated}})
		if err != nil {
			return nil, err
		}
		return mw.Handler(a), nil
	}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, &idemtest.Built{Build: build, Config: idem.Config{Lease: time.Second}}, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Crash}})
	wantOnly(t, f, idemtest.Crash, "after the outcome was recorded", "want the recorded answer replayed")
}

func TestLostAnswersFailsWithoutStoreRetries(t *testing.T) {
	e, _ := idem.New(memstore.New(), idem.Config{StoreRetries: 1})
	defer e.Close()
	var n atomic.Int64
	f := &idemtest.Recorder{}
	idemtest.Op(f, e, opEffect(&n), idemtest.OpCase{Request: opRequest(), Checks: []idemtest.Check{idemtest.LostAnswers}})
	wantOnly(t, f, idemtest.LostAnswers, "lost the answers", "want one successful answer", "fix: keep Config.StoreRetries")
}

// forever caches answers by key in front of the engine, forever.
type forever struct {
	mu   sync.Mutex
	seen map[string][]byte
	next http.Handler
}

func (f *forever) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	b, ok := f.seen[key]
	f.mu.Unlock()
	if !ok {
		rec := &bodyOnly{h: http.Header{}}
		f.next.ServeHTTP(rec, r)
		b = rec.b
		f.mu.Lock()
		f.seen[key] = b
		f.mu.Unlock()
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
}

func TestRetentionFailsOnCacheThatNeverExpires(t *testing.T) {
	a := &app{}
	seen := map[string][]byte{}
	build := func(e *idem.Engine) (http.Handler, error) {
		h, err := protected(a)(e)
		return &forever{seen: seen, next: h}, err
	}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, &idemtest.Built{Build: build, Config: idem.Config{TTL: time.Hour}}, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Retention}})
	wantOnly(t, f, idemtest.Retention, "1h0m1s later (TTL 1h0m0s)", "want exactly 2")
}

func TestObservabilityFailsWhenBuildIgnoresEngine(t *testing.T) {
	a := &app{}
	build := func(*idem.Engine) (http.Handler, error) {
		own, err := idem.New(memstore.New(), idem.Config{})
		if err != nil {
			return nil, err
		}
		return protected(a)(own)
	}
	f := &idemtest.Recorder{}
	idemtest.HTTP(f, &idemtest.Built{Build: build}, idemtest.Case{Path: "/charges", Body: body, Effects: a.count, Checks: []idemtest.Check{idemtest.Observability}})
	wantOnly(t, f, idemtest.Observability, "the observer saw outcomes []", "want [first replay mismatch]", "fix: Build must wire the engine")
}
