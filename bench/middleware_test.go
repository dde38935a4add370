package bench

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// body is a 200-byte JSON request body.
var body = func() []byte {
	b := []byte(`{"amount":5000,"currency":"EUR","customer":"cus_4711","description":"`)
	b = append(b, strings.Repeat("x", 200-len(b)-2)...)
	return append(b, `"}`...)
}()

var response = []byte(`{"id":"ch_1","status":"succeeded"}`)

// app is the handler behind the middleware: it reads the body and answers
// 201 with a small JSON document.
var app = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(response)
})

// sink is a reusable ResponseWriter, so the benchmark measures the
// middleware, not a recorder.
type sink struct {
	h      http.Header
	status int
	n      int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) WriteHeader(code int)        { s.status = code }
func (s *sink) Write(p []byte) (int, error) { s.n += len(p); return len(p), nil }

func (s *sink) reset() {
	clear(s.h)
	s.status, s.n = 0, 0
}

// middleware returns the handler under test: idemhttp over the memory
// store with the engine's defaults (replay cache on for this store).
func middleware(b *testing.B) http.Handler {
	h, eng := newMiddleware(b)
	b.Cleanup(func() { _ = eng.Close() })
	return h
}

// newMiddleware is middleware whose engine the caller closes.
func newMiddleware(b *testing.B) (http.Handler, *idem.Engine) {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
		Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
	if err != nil {
		b.Fatal(err)
	}
	return mw.Handler(app), eng
}

// request builds a POST carrying key; building it is part of every
// sub-benchmark, the baseline included, so differences are the middleware's.
func request(key string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://api.local/charges", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	return r
}

func serve(b *testing.B, h http.Handler, key func(i int) string, want int) {
	serveSteady(b, func() http.Handler { return h }, 0, key, want)
}

// serveSteady is serve with a fresh handler (and so a fresh memory store)
// every `every` requests, built with the timer stopped; 0 keeps one handler.
// With IDEM_BENCH_THREAD_CPU=1 it also reports thread-cpu-ns/op: the CPU
// time of the loop's own thread per request (see threadCPU), which other
// load on the machine moves less than ns/op; compare it between builds on
// a busy machine. It locks the loop to its thread, which itself costs
// ~100 ns/op, so leave it off when measuring ns/op.
func serveSteady(b *testing.B, newHandler func() http.Handler, every int, key func(i int) string, want int) {
	measured := os.Getenv("IDEM_BENCH_THREAD_CPU") == "1"
	if measured {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	w := &sink{h: http.Header{}}
	h := newHandler()
	b.ReportAllocs()
	var cpu0 time.Duration
	if measured {
		cpu0, measured = threadCPU()
	}
	var paused time.Duration
	i := 0
	for b.Loop() {
		if every > 0 && i > 0 && i%every == 0 {
			b.StopTimer()
			var p0, p1 time.Duration
			if measured {
				p0, _ = threadCPU()
			}
			h = newHandler()
			runtime.GC()
			if measured {
				p1, _ = threadCPU()
			}
			paused += p1 - p0
			b.StartTimer()
		}
		w.reset()
		h.ServeHTTP(w, request(key(i)))
		if w.status != want {
			b.Fatalf("status %d, want %d", w.status, want)
		}
		i++
	}
	if cpu1, _ := threadCPU(); measured && i > 0 {
		b.ReportMetric(float64(cpu1-cpu0-paused)/float64(i), "thread-cpu-ns/op")
	}
}

// BenchmarkMiddleware measures the middleware's CPU and allocations per
// request on the memory store. "bare" is the application handler alone:
// subtract it from the others for the middleware's own cost.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		serve(b, app, func(int) string { return "k" }, http.StatusCreated)
	})
	b.Run("first", func(b *testing.B) {
		h := middleware(b)
		serve(b, h, func(i int) string { return "first-" + strconv.Itoa(i) }, http.StatusCreated)
	})
	// first grows the memory store by one record per request for as long
	// as the benchmark runs (hundreds of thousands): the garbage collector
	// then scans an ever larger heap of records, a cost of keeping records
	// in the Go heap, not of the middleware. first-steady keeps at most
	// 10,000 live records, as a store whose expired records are swept would.
	// Each replaced engine is closed and dropped (not kept for a cleanup),
	// so that its store and replay cache become garbage.
	b.Run("first-steady", func(b *testing.B) {
		var eng *idem.Engine
		defer func() { _ = eng.Close() }()
		serveSteady(b, func() http.Handler {
			if eng != nil {
				_ = eng.Close()
			}
			var h http.Handler
			h, eng = newMiddleware(b)
			return h
		}, 10_000, func(i int) string { return "first-" + strconv.Itoa(i) }, http.StatusCreated)
	})
	b.Run("replay", func(b *testing.B) {
		h := middleware(b)
		w := &sink{h: http.Header{}}
		h.ServeHTTP(w, request("replayed"))
		serve(b, h, func(int) string { return "replayed" }, http.StatusCreated)
	})
	b.Run("replay-nocache", func(b *testing.B) {
		eng, err := idem.New(memstore.New(), idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope,
			Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
		if err != nil {
			b.Fatal(err)
		}
		h := mw.Handler(app)
		h.ServeHTTP(&sink{h: http.Header{}}, request("replayed"))
		serve(b, h, func(int) string { return "replayed" }, http.StatusCreated)
	})
}
