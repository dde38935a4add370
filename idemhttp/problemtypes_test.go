package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// serveRecorded runs one request through a middleware over a memory store
// and returns the problem it answered.
func serveRecorded(t *testing.T, r *http.Request) (*httptest.ResponseRecorder, idemhttp.Problem, int) {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return serveOn(t, st, r)
}

// serveOn is serveRecorded over st.
func serveOn(t *testing.T, st idem.Store, r *http.Request) (*httptest.ResponseRecorder, idemhttp.Problem, int) {
	t.Helper()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	w := httptest.NewRecorder()
	mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ })).ServeHTTP(w, r)
	var p idemhttp.Problem
	if ct := w.Header().Get("Content-Type"); ct != idemhttp.ProblemContentType {
		t.Fatalf("Content-Type %q, want %s (status %d, body %s)", ct, idemhttp.ProblemContentType, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	return w, p, calls
}

func TestRequestCancelledProblem(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{}`))
	r.Header.Set(idemhttp.HeaderName, `"k1"`)
	w, p, calls := serveRecorded(t, r)
	if w.Code != idemhttp.StatusClientClosedRequest || p.Type != idemhttp.TypeRequestCancelled || calls != 0 {
		t.Fatalf("status %d, type %q, handler ran %d times; want 499 %s, not run", w.Code, p.Type, calls, idemhttp.TypeRequestCancelled)
	}
}

// A deadline that passed on the server's side is not the client leaving:
// 503 with Retry-After, since the client may be waiting.
func TestRequestDeadlineProblem(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{}`))
	r.Header.Set(idemhttp.HeaderName, `"k1"`)
	w, p, calls := serveRecorded(t, r)
	if w.Code != http.StatusServiceUnavailable || p.Type != idemhttp.TypeRequestCancelled || calls != 0 {
		t.Fatalf("status %d, type %q, handler ran %d times; want 503 %s, not run", w.Code, p.Type, calls, idemhttp.TypeRequestCancelled)
	}
	if w.Header().Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (failingBody) Close() error               { return nil }

// A body that cannot be read is body-unreadable when what arrived is
// malformed, and request-cancelled when the client went away.
func TestBodyUnreadableProblem(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		typ    string
	}{
		{errors.New("invalid byte in chunk length"), http.StatusBadRequest, idemhttp.TypeBodyUnreadable},
		{io.ErrUnexpectedEOF, idemhttp.StatusClientClosedRequest, idemhttp.TypeRequestCancelled},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, idemhttp.StatusClientClosedRequest, idemhttp.TypeRequestCancelled},
		{os.ErrDeadlineExceeded, idemhttp.StatusClientClosedRequest, idemhttp.TypeRequestCancelled},
		{&http.MaxBytesError{Limit: 10}, http.StatusRequestEntityTooLarge, idemhttp.TypeBodyTooLarge},
	} {
		r := httptest.NewRequest("POST", "/orders", nil)
		r.Body, r.ContentLength = failingBody{c.err}, -1
		r.Header.Set(idemhttp.HeaderName, `"k1"`)
		w, p, calls := serveRecorded(t, r)
		if w.Code != c.status || p.Type != c.typ || calls != 0 {
			t.Errorf("%v: status %d, type %q, handler ran %d times; want %d %s, not run", c.err, w.Code, p.Type, calls, c.status, c.typ)
		}
	}
}

// TestProblemTypesDocumented checks that every Type* constant in
// problem.go has its anchor in docs/http.md's table of problem types.
func TestProblemTypesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if !strings.HasPrefix(name.Name, "Type") {
					continue
				}
				n++
				anchor, ok := anchorOf(spec.(*ast.ValueSpec).Values[0])
				if !ok {
					t.Errorf("%s is not ProblemBase + \"anchor\"", name.Name)
					continue
				}
				if !strings.Contains(string(doc), `<a id="`+anchor+`"></a>`) {
					t.Errorf("%s (#%s) is not in docs/http.md's table of problem types", name.Name, anchor)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no Type constants found in problem.go")
	}
}

// anchorOf returns "anchor" from the expression ProblemBase + "anchor".
func anchorOf(e ast.Expr) (string, bool) {
	bin, ok := e.(*ast.BinaryExpr)
	if !ok {
		return "", false
	}
	lit, ok := bin.Y.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// interruptedStore's Claim waits for its caller to go away, then fails as
// a driver does whose query was interrupted: with an error of its own.
type interruptedStore struct {
	idem.Store
	entered chan struct{}
}

func (s interruptedStore) Claim(ctx context.Context, _ idem.ClaimParams) (idem.ClaimResult, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	return idem.ClaimResult{}, errors.New("driver: query interrupted")
}

// A client that goes away while its key is being claimed is
// request-cancelled, not store-unavailable, even when the store reports
// the interruption as an error of its own.
func TestCancelledDuringClaimIsNotStoreUnavailable(t *testing.T) {
	t.Parallel()
	st := interruptedStore{Store: memstore.New(), entered: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-st.entered; cancel() }()
	r := httptest.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{}`))
	r.Header.Set(idemhttp.HeaderName, `"k1"`)
	r.Header.Set("Content-Type", "application/json")
	w, p, calls := serveOn(t, st, r)
	if w.Code != idemhttp.StatusClientClosedRequest || p.Type != idemhttp.TypeRequestCancelled || calls != 0 {
		t.Fatalf("status %d, type %q, handler ran %d times; want 499 %s, not run", w.Code, p.Type, calls, idemhttp.TypeRequestCancelled)
	}
}
