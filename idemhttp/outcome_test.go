package idemhttp_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/rawhttp"
	"github.com/idemkit/idem/memstore"
)

// finishWatch is a store that says when an outcome has been written.
type finishWatch struct {
	idem.Store
	finished atomic.Bool
}

func (s *finishWatch) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	rec, err := s.Store.Finish(ctx, p)
	if err == nil {
		s.finished.Store(true)
	}
	return rec, err
}

// goneEvents returns an observer that passes each client-gone event on.
func goneEvents() (idem.Observer, chan idem.Event) {
	ch := make(chan idem.Event, 16)
	return idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventClientGone {
			ch <- ev
		}
	}), ch
}

// waitEvent waits for one event, failing after a bound far above what the
// test needs.
func waitEvent(t *testing.T, ch chan idem.Event, what string) idem.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s event", what)
		return idem.Event{}
	}
}

// The response a handler writes, flushes included, reaches the client only
// once its outcome is recorded.
func TestResponseHeldUntilRecorded(t *testing.T) {
	t.Parallel()
	st := &finishWatch{Store: memstore.New()}
	got := make(chan struct{})
	e := newEnv(t, func(*testing.T) idem.Store { return st }, idem.Config{}, idemhttp.Config{},
		func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("line 1\n"))
			http.NewResponseController(w).Flush()
			select { // a client that got line 1 says so; one that did not cannot
			case <-got:
			case <-time.After(300 * time.Millisecond):
			}
			_, _ = w.Write([]byte("line 2\n"))
		})
	req, _ := http.NewRequest("POST", e.srv.URL+"/s", strings.NewReader("{}"))
	req.Header.Set(idemhttp.HeaderName, `"s"`)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !st.finished.Load() {
		t.Error("the client got the response before its outcome was recorded")
	}
	close(got)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "line 1\nline 2\n" {
		t.Fatalf("response %q", b)
	}
	r := e.do("POST", "/s", `"s"`, "{}")
	if r.body != "line 1\nline 2\n" || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("replay %q", r.body)
	}
}

// A client that resets its connection while the handler runs does not
// change the outcome: the handler's response is recorded and replayed, and
// the client's leaving is reported.
func TestClientResetDuringEffect(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		obs, gone := goneEvents()
		var clientCtx atomic.Value // the request's own context, before the middleware
		started := make(chan struct{})
		e := newEnv(t, open, idem.Config{Observer: obs}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-clientCtx.Load().(context.Context).Done() // the client is gone
			w.Header().Set("Location", "/orders/1")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":1}`))
		})
		inner := e.srv.Config.Handler
		e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clientCtx.Store(r.Context())
			inner.ServeHTTP(w, r)
		})
		c := rawhttp.Post(t, e.srv.Listener.Addr().String(), "/orders", `"r1"`, `{"a":1}`, -1)
		<-started
		rawhttp.Reset(t, c)
		ev := waitEvent(t, gone, "client-gone")
		if ev.Operation != "POST" || ev.Key != "r1" {
			t.Errorf("client-gone event %+v", ev)
		}
		rec, err := e.store.Get(context.Background(), "", "r1")
		if err != nil || rec.State != idem.StateSucceeded {
			t.Fatalf("record after the client left: %+v, %v; want succeeded", rec, err)
		}
		r := e.do("POST", "/orders", `"r1"`, `{"a":1}`)
		if r.status != http.StatusCreated || r.body != `{"id":1}` || r.header.Get("Location") != "/orders/1" ||
			r.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("retry: %d %q %v", r.status, r.body, r.header)
		}
		if n := e.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
}

// bigBody is an 8 MB response.
var bigBody = bytes.Repeat([]byte("0123456789abcdef"), 1<<19)

// A client that never reads a large response holds neither the handler
// nor the record: the outcome is recorded before the response is written;
// then the client resets, or is given up on after the write timeout, and a
// retry replays the response whole.
func TestStalledReaderDoesNotHoldRecord(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"reset", 0}, {"write timeout", time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			obs, gone := goneEvents()
			e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{Observer: obs},
				idemhttp.Config{MaxResponse: 16 << 20, WriteTimeout: c.timeout},
				func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/octet-stream")
					_, _ = w.Write(bigBody)
				})
			conn := rawhttp.Post(t, e.srv.Listener.Addr().String(), "/orders", `"big"`, `{}`, -1)
			if c.timeout == 0 {
				waitState(t, e.store, "big", idem.StateSucceeded)
				rawhttp.Reset(t, conn)
			} else {
				waitEvent(t, gone, "client-gone") // given up on: the server closed it
				waitState(t, e.store, "big", idem.StateSucceeded)
			}
			if c.timeout != 0 {
				// The record is whole. (A replay through this middleware
				// would be held to the same short timeout, which a loaded
				// machine's reader may miss.)
				rec, _ := e.store.Get(context.Background(), "", "big")
				rr, err := idemhttp.DecodeResponse(rec.Result)
				if err != nil {
					t.Fatal(err)
				}
				if rr.TooLarge || sha256.Sum256(rr.Body) != sha256.Sum256(bigBody) {
					t.Fatalf("record: too large %v, %d bytes", rr.TooLarge, len(rr.Body))
				}
				return
			}
			r := e.do("POST", "/orders", `"big"`, `{}`)
			if r.status != http.StatusOK || sha256.Sum256([]byte(r.body)) != sha256.Sum256(bigBody) || r.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Fatalf("retry: %d, %d bytes, %v", r.status, len(r.body), r.header)
			}
		})
	}
}

// waitState waits until key's record is in state, failing after a bound
// far above what it takes.
func waitState(t *testing.T, st idem.Store, key string, state idem.State) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec, err := st.Get(context.Background(), "", key)
		if err == nil && rec.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %q: %+v, %v; want %s", key, rec, err, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readResponse reads one response from c.
func readResponse(t *testing.T, c net.Conn) reply {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// A client that half-closes its connection before its body arrived in full
// is request-cancelled (499), not a malformed request, and nothing is
// claimed.
func TestHalfCloseBeforeClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{}, func(w http.ResponseWriter, r *http.Request) {})
		c := rawhttp.Post(t, e.srv.Listener.Addr().String(), "/orders", `"h1"`, `{"amount":`, 40)
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		r := readResponse(t, c)
		wantProblem(t, r, idemhttp.StatusClientClosedRequest, idemhttp.TypeRequestCancelled)
		if _, err := e.store.Get(context.Background(), "", "h1"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("record after a half-close: %v, want none", err)
		}
		if e.calls.Load() != 0 {
			t.Fatal("the handler ran")
		}
	})
}

// A protected request asking to switch protocols is refused before
// anything is claimed.
func TestUpgradeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{}, idemhttp.Config{},
		func(w http.ResponseWriter, r *http.Request) {})
	r := e.do("POST", "/ws", `"u1"`, `{}`, "Connection", "Upgrade", "Upgrade", "websocket")
	wantProblem(t, r, http.StatusBadRequest, idemhttp.TypeUpgradeRefused)
	if _, err := e.store.Get(context.Background(), "", "u1"); !errors.Is(err, idem.ErrNotFound) || e.calls.Load() != 0 {
		t.Fatalf("an Upgrade request was claimed (%v) or run (%d)", err, e.calls.Load())
	}
}

// A handler that answers 101 or takes the connection over leaves an
// unknown outcome, never an empty 200: the client gets 500 and retries 409.
func TestHandlerSwitchingProtocolsIsUnknown(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"101": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusSwitchingProtocols) },
		"hijack": func(w http.ResponseWriter, r *http.Request) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_, _ = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\n\r\n"))
				_ = conn.Close()
			}
		},
		"hijacker": func(w http.ResponseWriter, r *http.Request) {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{}, idemhttp.Config{}, h)
			wantProblem(t, e.do("POST", "/x", `"k"`, `{}`), http.StatusInternalServerError, idemhttp.TypeInternal)
			wantProblem(t, e.do("POST", "/x", `"k"`, `{}`), http.StatusConflict, idemhttp.TypeOutcomeUnknown)
		})
	}
}

// rawClient sends exactly the headers it is given: no Accept-Encoding of
// its own, no transparent decoding.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func sendAE(t *testing.T, url, key, acceptEncoding string) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
	req.Header.Set(idemhttp.HeaderName, key)
	req.Header.Set("Content-Type", "application/json")
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// A recorded body with a content coding is replayed as it is only to a
// client that accepts the coding; others get it decoded, or a problem
// when idem cannot decode it.
func TestReplayHonoursAcceptEncoding(t *testing.T) {
	t.Parallel()
	const plain = `{"id":"ch_1","status":"succeeded"}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(plain))
	_ = zw.Close()
	e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{}, idemhttp.Config{},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"v1"`)
			if r.URL.Path == "/br" {
				w.Header().Set("Content-Encoding", "br")
				_, _ = w.Write([]byte("not really brotli"))
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz.Bytes())
		})
	first := sendAE(t, e.srv.URL+"/gz", `"g"`, "gzip")
	if first.body != gz.String() {
		t.Fatal("first response is not the handler's gzip body")
	}
	for _, c := range []struct {
		accept, body, encoding, etag string
	}{
		{"gzip", gz.String(), "gzip", `"v1"`},
		{"br, gzip;q=0.5", gz.String(), "gzip", `"v1"`},
		{"*", gz.String(), "gzip", `"v1"`},
		{"x-gzip", gz.String(), "gzip", `"v1"`},
		{"", plain, "", `W/"v1"`},
		{"identity", plain, "", `W/"v1"`},
		{"gzip;q=0", plain, "", `W/"v1"`},
		{"*, gzip;q=0", plain, "", `W/"v1"`},
		{"br", plain, "", `W/"v1"`},
	} {
		r := sendAE(t, e.srv.URL+"/gz", `"g"`, c.accept)
		if r.status != 200 || r.body != c.body || r.header.Get("Content-Encoding") != c.encoding || r.header.Get("ETag") != c.etag {
			t.Errorf("Accept-Encoding %q: %d, body %q, Content-Encoding %q, ETag %q; want body %q, %q, %q",
				c.accept, r.status, r.body, r.header.Get("Content-Encoding"), r.header.Get("ETag"), c.body, c.encoding, c.etag)
		}
	}
	sendAE(t, e.srv.URL+"/br", `"b"`, "br")
	if r := sendAE(t, e.srv.URL+"/br", `"b"`, "br"); r.body != "not really brotli" || r.header.Get("Content-Encoding") != "br" {
		t.Errorf("br replay to a client accepting br: %q %v", r.body, r.header)
	}
	r := sendAE(t, e.srv.URL+"/br", `"b"`, "gzip")
	p := wantProblem(t, r, http.StatusNotAcceptable, idemhttp.TypeEncodingNotAcceptable)
	if !strings.Contains(p.Detail, "br") || r.header.Get("ETag") != "" || r.header.Get("Content-Encoding") != "" {
		t.Errorf("problem %q, headers %v", p.Detail, r.header)
	}
}

// "post" and "POST" are one method: one record, one operation name.
func TestMethodCaseSharesRecord(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ops, methods []string
	obs := idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventOutcome {
			mu.Lock()
			ops = append(ops, ev.Operation+" "+string(ev.Outcome))
			mu.Unlock()
		}
	})
	e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{Observer: obs}, idemhttp.Config{},
		func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			methods = append(methods, r.Method)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		})
	wantStatus(t, e.do("post", "/x", `"m"`, `{}`), http.StatusCreated)
	r := e.do("POST", "/x", `"m"`, `{}`)
	wantStatus(t, r, http.StatusCreated)
	if r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatal("POST after post with the same key was not a replay")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(ops, ",") != "POST first,POST replay" || strings.Join(methods, ",") != "POST" {
		t.Fatalf("operations %q, handler saw %q", ops, methods)
	}
}

// An invalid status panics in the handler, as net/http does, so that the
// outcome is unknown rather than a record no replay can serve.
func TestInvalidStatusIsUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(*testing.T) idem.Store { return memstore.New() }, idem.Config{},
		idemhttp.Config{RecoverPanics: true, Logger: slog.New(slog.DiscardHandler)},
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(42) })
	wantProblem(t, e.do("POST", "/x", `"k"`, `{}`), http.StatusInternalServerError, idemhttp.TypeInternal)
	wantProblem(t, e.do("POST", "/x", `"k"`, `{}`), http.StatusConflict, idemhttp.TypeOutcomeUnknown)
}
