package idemhttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

func TestResponseTooLargeIsNotTruncated(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		big := strings.Repeat("x", 100)
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{MaxResponse: 64}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/big/1")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(big))
		})
		first := e.do("POST", "/big", `"t"`, `{}`)
		if first.status != http.StatusCreated || first.body != big {
			t.Fatalf("first response: %d, %d bytes; want the whole body", first.status, len(first.body))
		}
		r := e.do("POST", "/big", `"t"`, `{}`)
		p := wantProblem(t, r, http.StatusCreated, idemhttp.TypeResponseTooLarge)
		if p.RecordedStatus != http.StatusCreated || r.header.Get(idemhttp.ReplayedHeader) != "true" || r.header.Get("Location") != "/big/1" {
			t.Fatalf("too-large replay: %+v, headers %v", p, r.header)
		}
		if e.calls.Load() != 1 {
			t.Fatal("handler ran again")
		}
		rec, err := e.store.Get(context.Background(), "", "t")
		if err != nil {
			t.Fatal(err)
		}
		rr, err := idemhttp.DecodeResponse(rec.Result)
		if err != nil || !rr.TooLarge || len(rr.Body) != 0 || rr.Size != 100 {
			t.Fatalf("record = %+v, %v; want too_large, no body, size 100", rr, err)
		}
	})
}

func TestPanicMarksUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		for _, recover := range []bool{false, true} {
			e := newEnv(t, open, idem.Config{}, idemhttp.Config{RecoverPanics: recover}, func(w http.ResponseWriter, r *http.Request) {
				panic("boom")
			})
			e.srv.Config.ErrorLog = discardLog()
			req, _ := http.NewRequest("POST", e.srv.URL+"/p", strings.NewReader("{}"))
			req.Header.Set(idemhttp.HeaderName, `"p"`)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if recover {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusInternalServerError {
					t.Fatalf("recovered panic: status %d, want 500", resp.StatusCode)
				}
			} else if err == nil {
				resp.Body.Close()
				t.Fatalf("propagated panic: got a response (%d), want the connection aborted", resp.StatusCode)
			}
			wantProblem(t, e.do("POST", "/p", `"p"`, "{}"), http.StatusConflict, idemhttp.TypeOutcomeUnknown)
			if e.calls.Load() != 1 {
				t.Fatalf("handler ran %d times", e.calls.Load())
			}
		}
	})
}

// TestRecordedPreludeOfAnyLength replays responses whose status and
// recorded headers encode in fewer and in more bytes than the recorder
// keeps without allocating, written at once, in pieces, not at all, and
// too large to record.
func TestRecordedPreludeOfAnyLength(t *testing.T) {
	long := "/charges/" + strings.Repeat("c", 80)
	cases := []struct {
		name     string
		location string
		chunks   []string
	}{
		{"short, one write", "/c/1", []string{`{"id":"ch_1"}`}},
		{"short, pieces", "/c/1", []string{`{"id":`, `"ch_1"`, `}`}},
		{"short, no body", "/c/1", nil},
		{"long, one write", long, []string{`{"id":"ch_1"}`}},
		{"long, pieces", long, []string{`{"id":`, `"ch_1"`, `}`}},
		{"long, no body", long, nil},
		{"short, too large", "/c/1", []string{strings.Repeat("x", 60), strings.Repeat("y", 60)}},
		{"long, too large", long, []string{strings.Repeat("x", 60), strings.Repeat("y", 60)}},
	}
	open := func(*testing.T) idem.Store { return memstore.New() }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, open, idem.Config{ReplayCache: idem.ReplayCacheConfig{MaxBytes: -1}}, idemhttp.Config{MaxResponse: 100},
				func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Location", c.location)
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("ETag", `"v1"`)
					w.WriteHeader(http.StatusCreated)
					for _, s := range c.chunks {
						_, _ = w.Write([]byte(s))
					}
				})
			body := strings.Join(c.chunks, "")
			first := e.do("POST", "/c", `"k"`, `{}`)
			if first.status != http.StatusCreated || first.body != body {
				t.Fatalf("first: %d %q", first.status, first.body)
			}
			r := e.do("POST", "/c", `"k"`, `{}`)
			if r.header.Get(idemhttp.ReplayedHeader) != "true" || r.header.Get("Location") != c.location {
				t.Fatalf("replay headers %v", r.header)
			}
			if len(body) > 100 {
				p := wantProblem(t, r, http.StatusCreated, idemhttp.TypeResponseTooLarge)
				if p.RecordedStatus != http.StatusCreated {
					t.Fatalf("too-large replay: %+v", p)
				}
				return
			}
			if r.status != http.StatusCreated || r.body != body || r.header.Get("ETag") != `"v1"` ||
				r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("replay: %d %q %v", r.status, r.body, r.header)
			}
		})
	}
}
