package idemhttp_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// sink is a reusable ResponseWriter.
type sink struct {
	h      http.Header
	status int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) WriteHeader(code int)        { s.status = code }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }

// rewindBody is a request body that can be read again after a rewind.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// TestMiddlewareAllocations bounds what the middleware allocates on its
// own for a first-time request of a principal (scoped by a trusted
// header) and for a replay from the engine's cache
// (the request and the handler's work are reused or not counted). The
// ceilings are today's counts: undoing an optimisation they guard — the
// call holding its intent and control context, the per-member digests
// only for a claim, the engine's own savings — pushes a count above one.
func TestMiddlewareAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector (sync.Pool drops entries)")
	}
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id"),
		Rules: []idemhttp.Rule{{Methods: []string{http.MethodPost}, Requirement: idemhttp.Required}}})
	if err != nil {
		t.Fatal(err)
	}
	resp := []byte(`{"id":"ch_1","status":"succeeded"}`)
	ctype := []string{"application/json"}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = ctype
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(resp)
	}))
	body := []byte(`{"amount":5000,"currency":"EUR","customer":"cus_4711","description":"a charge"}`)
	rb := &rewindBody{}
	r, _ := http.NewRequest(http.MethodPost, "http://api.local/charges", rb)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-User-Id", "user-1")
	w := &sink{h: http.Header{}}
	serve := func(key []string, want int) {
		clear(w.h)
		w.status = 0
		rb.Reset(body)
		r.ContentLength = int64(len(body))
		r.Header["Idempotency-Key"] = key
		h.ServeHTTP(w, r)
		if w.status != want {
			t.Fatalf("status %d, want %d", w.status, want)
		}
	}

	const runs = 200
	keys := make([][]string, 3*runs+2)
	for i := range keys {
		keys[i] = []string{"first-" + strconv.Itoa(i)}
	}
	i := 0
	first := testing.AllocsPerRun(runs, func() { serve(keys[i], http.StatusCreated); i++ })
	replay := testing.AllocsPerRun(runs, func() { serve(keys[0], http.StatusCreated) })
	t.Logf("first %.0f, replay %.0f allocations", first, replay)
	// 19: the engine's 10 (see the root package's TestEngineAllocations,
	// which counts the detached effect context) and the middleware's own,
	// one of which is the field digests keyed for the request's scope (the
	// MACs themselves are pooled).
	if first > 19 {
		t.Errorf("a first-time request allocates %.0f objects, want at most 19", first)
	}
	if replay > 4 {
		t.Errorf("a replay allocates %.0f objects, want at most 4", replay)
	}

	// Bytes matter as much as objects: the collector runs once per so many
	// bytes allocated, and scans the live records each time.
	firstBytes := bytesPerRun(runs, func() { serve(keys[i], http.StatusCreated); i++ })
	replayBytes := bytesPerRun(runs, func() { serve(keys[0], http.StatusCreated) })
	t.Logf("first %.0f, replay %.0f bytes", firstBytes, replayBytes)
	if firstBytes > maxFirstBytes {
		t.Errorf("a first-time request allocates %.0f bytes, want at most %d", firstBytes, maxFirstBytes)
	}
	if replayBytes > maxReplayBytes {
		t.Errorf("a replay allocates %.0f bytes, want at most %d", replayBytes, maxReplayBytes)
	}
}

// The byte ceilings are today's figures with a little room (a sync.Pool
// emptied by a collection during the runs costs a buffer). The first
// request's figure includes the intent's `"origin":"http"` (16 bytes, in the
// encoded journal and in the store's copy of it), which lets a decision
// taken outside the request path store a result the middleware replays,
// and the field digests keyed for the scope (with the key's id) beside the
// unkeyed ones they are computed from.
const (
	maxFirstBytes  = 3400
	maxReplayBytes = 600
)

// bytesPerRun returns the bytes f allocates per call, averaged over runs
// calls after a warm-up call.
func bytesPerRun(runs int, f func()) float64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}
