package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultFixtureDelay is how long the fixture's effect takes unless
// Fixture.Delay says otherwise: long enough for the concurrency probe's
// duplicates to arrive while the first is still running.
const DefaultFixtureDelay = 100 * time.Millisecond

// Fixture is the auditor's own upstream: a stand-in for the effect behind
// an idempotency layer that is audited on its own (idem proxy, a gateway's
// idempotency plugin, a middleware in front of a test handler). Every
// request other than GET, HEAD and OPTIONS is an effect: it takes Delay,
// is counted, and is answered 201 with a JSON body naming the effect by
// its number, so that two effects never get the same answer:
//
//	{"effect":7,"method":"POST","path":"/charges","body_sha256":"…"}
//
// GET /effects answers {"count": N}; any other GET is 404. A Fixture is
// a [Counter]: an audit with Options.Counter set to it counts effects
// without requests of its own (idem audit --fixture ADDR serves one).
type Fixture struct {
	// Delay is how long each effect takes. Zero is
	// [DefaultFixtureDelay]; negative is none.
	Delay time.Duration
	n     atomic.Int64
}

// Effects returns how many effects the fixture has made.
func (f *Fixture) Effects(context.Context) (int64, error) { return f.n.Load(), nil }

// ServeHTTP makes one effect per mutating request.
func (f *Fixture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if r.URL.Path != "/effects" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"count":%d}`+"\n", f.n.Load())
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	d := f.Delay
	if d == 0 {
		d = DefaultFixtureDelay
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			// The caller went away before the effect: nothing was made.
			return
		}
	}
	n := f.n.Add(1)
	sum := sha256.Sum256(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"effect":%d,"method":%q,"path":%q,"body_sha256":%q}`+"\n", n, r.Method, r.URL.Path, hex.EncodeToString(sum[:]))
}
