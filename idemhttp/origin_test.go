package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// TestDecisionReplays: a record the middleware made and left unknown,
// decided through idem.EncodeDecision (as reconciliation and idem resolve
// do), replays the decision to the next retry, status, type and body.
func TestDecisionReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		panic(http.ErrAbortHandler) // the attempt dies mid-effect: unknown
	}))
	charge := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":1250}`))
		req.Header.Set("Idempotency-Key", `"o-42"`)
		rw := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(rw, req)
		}()
		return rw
	}
	charge()
	rec, err := eng.Store().Get(ctx, "", "o-42")
	if err != nil || rec.State != idem.StateUnknown || rec.Origin() != idemhttp.Origin {
		t.Fatalf("after the crash: %+v, %v; want an unknown record of origin http", rec, err)
	}
	val, err := idem.EncodeDecision(rec, idem.Decision{As: idem.StateFailed, Status: http.StatusUnprocessableEntity,
		Body: []byte(`{"title":"not applied"}`), ContentType: "application/problem+json"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Resolve(ctx, "", "o-42", idem.Resolution{As: idem.StateFailed, Result: val, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	rw := charge()
	if rw.Code != http.StatusUnprocessableEntity || rw.Header().Get("Content-Type") != "application/problem+json" ||
		rw.Body.String() != `{"title":"not applied"}` || rw.Header().Get(idemhttp.ReplayedHeader) != "true" || ran != 1 {
		t.Fatalf("retry after the decision: %d %v %q (handler ran %d times)", rw.Code, rw.Header(), rw.Body, ran)
	}
}

// TestEncodeDecisionDefaults: the status defaults by outcome, a status
// that is not final is refused, and the content type is detected.
func TestEncodeDecisionDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d      idem.Decision
		status int
		ctype  string
	}{
		{idem.Decision{As: idem.StateSucceeded, Body: []byte(`{"a":1}`)}, 200, "application/json"},
		{idem.Decision{As: idem.StateFailed}, 500, ""},
		{idem.Decision{As: idem.StateFailed, Body: []byte("plain words")}, 500, "text/plain; charset=utf-8"},
		{idem.Decision{As: idem.StateSucceeded, Body: []byte(`[1, 2]`)}, 200, "application/json"},
		{idem.Decision{As: idem.StateSucceeded, Body: []byte("<html><body>ok</body>")}, 200, "text/html; charset=utf-8"},
		{idem.Decision{As: idem.StateSucceeded, Status: 201, Body: []byte("x"), ContentType: "text/csv"}, 201, "text/csv"},
	} {
		b, err := idemhttp.EncodeDecision(c.d)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := idemhttp.DecodeResponse(b)
		if err != nil || rr.Status != c.status || rr.Header.Get("Content-Type") != c.ctype || string(rr.Body) != string(c.d.Body) {
			t.Errorf("%+v: %+v, %v; want %d %q", c.d, rr, err, c.status, c.ctype)
		}
	}
	for _, s := range []int{99, 100, 199, 600} {
		if _, err := idemhttp.EncodeDecision(idem.Decision{As: idem.StateSucceeded, Status: s}); err == nil {
			t.Errorf("status %d was encoded", s)
		}
	}
}
