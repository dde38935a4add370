package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

func TestTrustedHeaderScopeValues(t *testing.T) {
	t.Parallel()
	scope := idemhttp.TrustedHeaderScope("x-user-id")
	for _, c := range []struct {
		values []string
		want   string // "" for ErrNoScope
	}{
		{[]string{"user-1"}, "user-1"},
		{[]string{"  user-1\t"}, "user-1"},
		{[]string{"User-1"}, "User-1"}, // compared as-is
		{[]string{"user 1"}, "user 1"},
		{[]string{"a, b"}, "a, b"},
		{nil, ""},
		{[]string{""}, ""},
		{[]string{" \t "}, ""},
		{[]string{"user-1", "user-2"}, ""}, // a client's copy got past the gateway
	} {
		r, _ := http.NewRequest("POST", "/", nil)
		for _, v := range c.values {
			r.Header.Add("X-User-Id", v)
		}
		got, err := scope(r)
		if c.want == "" {
			if !errors.Is(err, idemhttp.ErrNoScope) {
				t.Errorf("%q: scope %q, %v; want ErrNoScope", c.values, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: scope %q, %v; want %q", c.values, got, err, c.want)
		}
	}
}

// Through the middleware: a trimmed value and a lower-case header name
// are the same principal and replay; another case of the value is
// another principal; a request without the header is refused, nothing
// claimed.
func TestTrustedHeaderScopeMiddleware(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, created(&n))
		wantStatus(t, e.do("POST", "/c", `"k"`, `{}`, "X-User-Id", "u1"), http.StatusCreated)
		r := e.do("POST", "/c", `"k"`, `{}`, "x-user-id", "  u1 ")
		if r.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("the trimmed value did not replay: %d %v", r.status, r.header)
		}
		if r := e.do("POST", "/c", `"k"`, `{}`, "X-User-Id", "U1"); r.header.Get(idemhttp.ReplayedHeader) != "" {
			t.Fatalf("U1 replayed u1's response")
		}
		p := wantProblem(t, e.do("POST", "/c", `"k2"`, `{}`), http.StatusUnauthorized, idemhttp.TypeScopeMissing)
		if p.Status != 401 {
			t.Fatal(p)
		}
		if e.calls.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2", e.calls.Load())
		}
		if _, err := e.store.Get(context.Background(), "", "k2"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("a refused request left a record: %v", err)
		}
	})
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values []string
		want   string // "" for ErrNoScope
	}{
		{[]string{"Bearer abc.def-_~+/=="}, "abc.def-_~+/=="},
		{[]string{"bearer abc"}, "abc"},
		{[]string{"BEARER    abc  "}, "abc"},
		{[]string{"Basic dXNlcjpwdw=="}, ""},
		{[]string{"Bearer"}, ""},
		{[]string{"Bearer "}, ""},
		{[]string{"Bearer a b"}, ""},
		{[]string{"Bearer =abc"}, ""},
		{[]string{"Bearer abc=d"}, ""},
		{[]string{"Bearer a", "Bearer b"}, ""},
		{nil, ""},
	} {
		h := http.Header{}
		for _, v := range c.values {
			h.Add("Authorization", v)
		}
		got, err := idemhttp.BearerToken(h)
		if c.want == "" {
			if !errors.Is(err, idemhttp.ErrNoScope) {
				t.Errorf("%q: %q, %v; want ErrNoScope", c.values, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.values, got, err, c.want)
		}
	}
}

// BearerScope: the scope is the claim's value (a refreshed token of the
// same subject keeps it), several claims make a JSON array, and every
// refusal is 401 scope-unauthenticated with a Bearer challenge, before
// anything is claimed.
func TestBearerScopeMiddleware(t *testing.T) {
	tokens := map[string]map[string]any{
		"a1": {"iss": "https://one.example", "sub": "user-1"},
		"a2": {"iss": "https://one.example", "sub": "user-1", "jti": "refreshed"},
		"b":  {"iss": "https://two.example", "sub": "user-1"},
		"n":  {"iss": "https://one.example", "sub": 42},
	}
	errExpired := errors.New("token expired")
	verify := func(ctx context.Context, token string) (map[string]any, error) {
		if ctx == nil {
			t.Error("verify got no context")
		}
		if token == "expired" {
			return nil, &idemhttp.UnauthenticatedError{Challenge: idemhttp.InvalidTokenChallenge, Reason: "the token has expired", Err: errExpired}
		}
		if c, ok := tokens[token]; ok {
			return c, nil
		}
		return nil, errors.New("signature invalid")
	}
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.BearerScope(verify, "iss", "sub")}, created(&n))
		wantStatus(t, e.do("POST", "/c", `"k"`, `{}`, "Authorization", "Bearer a1"), http.StatusCreated)
		if r := e.do("POST", "/c", `"k"`, `{}`, "Authorization", "bearer  a2"); r.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("a refreshed token of the same subject did not replay: %d", r.status)
		}
		if r := e.do("POST", "/c", `"k"`, `{}`, "Authorization", "Bearer b"); r.header.Get(idemhttp.ReplayedHeader) != "" {
			t.Fatal("the same subject of another issuer replayed the first issuer's response")
		}
		if _, err := e.store.Get(context.Background(), `["https://one.example","user-1"]`, "k"); err != nil {
			t.Fatalf("record of scope [iss, sub]: %v", err)
		}
		for _, c := range []struct{ auth, challenge, detail string }{
			{"", "Bearer", "no bearer token"},
			{"Basic dXNlcjpwdw==", "Bearer", "no bearer token"},
			{"Bearer expired", idemhttp.InvalidTokenChallenge, "the token has expired"},
			{"Bearer forged", idemhttp.InvalidTokenChallenge, "the bearer token is not valid"},
			{"Bearer n", idemhttp.InvalidTokenChallenge, `no "sub" claim`},
		} {
			var hdr []string
			if c.auth != "" {
				hdr = []string{"Authorization", c.auth}
			}
			r := e.do("POST", "/c", `"k-refused"`, `{}`, hdr...)
			p := wantProblem(t, r, http.StatusUnauthorized, idemhttp.TypeScopeUnauthenticated)
			if got := r.header.Get("WWW-Authenticate"); got != c.challenge {
				t.Errorf("%q: WWW-Authenticate %q, want %q", c.auth, got, c.challenge)
			}
			if !strings.Contains(p.Detail, c.detail) || strings.Contains(r.body, "forged") {
				t.Errorf("%q: detail %q, want it to say %q (and not echo the token)", c.auth, p.Detail, c.detail)
			}
		}
		if e.calls.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2", e.calls.Load())
		}
		recs, err := e.store.List(context.Background(), idem.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Key == "k-refused" {
				t.Fatalf("a refused request left a record in scope %q", rec.Scope)
			}
		}
		if len(recs) != 2 {
			t.Fatalf("%d records, want 2", len(recs))
		}
	})
}

func TestBearerScopeErrors(t *testing.T) {
	t.Parallel()
	cause := errors.New("kid unknown")
	scope := idemhttp.BearerScope(func(context.Context, string) (map[string]any, error) { return nil, cause })
	r, _ := http.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer x")
	_, err := scope(r)
	var ue *idemhttp.UnauthenticatedError
	if !errors.As(err, &ue) || !errors.Is(err, cause) {
		t.Fatalf("error %v: want an *UnauthenticatedError wrapping the verifier's", err)
	}
	r.Header.Del("Authorization")
	if _, err := scope(r); !errors.Is(err, idemhttp.ErrNoScope) || !errors.As(err, &ue) {
		t.Fatalf("no token: %v, want an *UnauthenticatedError wrapping ErrNoScope", err)
	}
}

// BearerToken never panics, and what it accepts is a token68 that reads
// back the same from a canonical header.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  a.b.c", "Bearer a==", "Bearer =", "Basic x", "Bearer", "Bearer a b", " Bearer\tx", "BEARER x~+/-_."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := idemhttp.BearerToken(http.Header{"Authorization": {v}})
		if err != nil {
			if !errors.Is(err, idemhttp.ErrNoScope) {
				t.Fatalf("%q: error %v does not wrap ErrNoScope", v, err)
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("%q: token %q", v, tok)
		}
		again, err := idemhttp.BearerToken(http.Header{"Authorization": {"Bearer " + tok}})
		if err != nil || again != tok {
			t.Fatalf("%q: token %q reads back as %q, %v", v, tok, again, err)
		}
	})
}
