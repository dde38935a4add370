package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// TestProxyScopeModeRequired: the proxy refuses to start without a scope
// mode, naming the three, and with more than one, or with JWT flags
// without --scope-jwt.
func TestProxyScopeModeRequired(t *testing.T) {
	t.Parallel()
	base := []string{"proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--store", "memory://", "--spool", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "a scope mode is required: --scope-header NAME (a principal set by a trusted gateway), --scope-jwt --jwks FILE|URL"},
		{[]string{"--scope-header", "X-User-Id", "--global-scope"}, "--scope-header and --global-scope cannot be combined"},
		{[]string{"--scope-jwt", "--jwks", "k.json", "--global-scope"}, "--scope-jwt and --global-scope cannot be combined"},
		{[]string{"--scope-jwt", "--jwks", "k.json", "--scope-header", "X-User-Id"}, "--scope-header and --scope-jwt cannot be combined"},
		{[]string{"--global-scope", "--jwks", "k.json"}, "--jwks applies only with --scope-jwt"},
		{[]string{"--scope-header", "X-User-Id", "--scope-claim", "iss,sub"}, "--scope-claim applies only with --scope-jwt"},
		{[]string{"--global-scope", "--jwt-audience", "api"}, "--jwt-audience applies only with --scope-jwt"},
		{[]string{"--scope-jwt"}, "--scope-jwt needs --jwks"},
		{[]string{"--scope-jwt", "--jwks", "http://idp.example/jwks.json"}, "use https"},
		{[]string{"--scope-jwt", "--jwks", "k.json", "--scope-claim", "iss,,sub"}, "empty claim name"},
		{[]string{"--scope-jwt", "--jwks", "k.json", "--scope-claim", "sub,sub"}, "sub is named twice"},
		{[]string{"--scope-header", "Authorization"}, "would scope keys by a credential"},
		{[]string{"--scope-header", "bad header"}, `--scope-header: "bad header" is not a header field name`},
	} {
		// Should it start instead, it is stopped after a few seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var o, eb strings.Builder
		code := run(ctx, append(base, c.args...), &o, &eb)
		cancel()
		e := eb.String()
		lines := strings.Split(strings.TrimSpace(e), "\n")
		if code != exitUsage || !strings.Contains(e, c.want) || len(lines) != 2 || lines[1] != "Run 'idem proxy --help' for usage." {
			t.Errorf("%v: code %d, stderr %q; want 2 and one line with %q", c.args, code, e, c.want)
		}
	}
	if _, e, code := runCLI(append(base, "--scope-jwt", "--jwks", filepath.Join(t.TempDir(), "none.json"))...); code != exitFailure || !strings.Contains(e, "--jwks") {
		t.Errorf("a missing --jwks file: code %d, stderr %q; want 1 naming --jwks", code, e)
	}
	short := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(short, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, e, code := runCLI(append(base, "--global-scope", "--digest-secret-file", short)...); code != exitFailure || !strings.Contains(e, "at least 16") {
		t.Errorf("a short digest secret: code %d, stderr %q; want 1 and at least 16 bytes", code, e)
	}
}

// rawSend writes one request with the header lines given as they are
// (names and spacing untouched by a client library) and returns its
// status and body.
func rawSend(t *testing.T, addr, path, key, body string, lines ...string) resp {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n" +
		"Idempotency-Key: " + key + "\r\n" + fmt.Sprintf("Content-Length: %d\r\n", len(body))
	for _, l := range lines {
		req += l + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&sb)
	return resp{res.StatusCode, res.Header, sb.String()}
}

// storeRecords lists every record in the store at dsn.
func storeRecords(t *testing.T, dsn string) []idem.Record {
	t.Helper()
	st, err := storeopen.Open(context.Background(), dsn, storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.List(context.Background(), idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// --scope-header: a value trimmed, however the client spaced it, and a
// header name in any case are one principal; another case of the value is
// another; a missing, empty or repeated header is 401, nothing claimed.
func TestProxyScopeHeader(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("for " + r.Header.Get("X-User-Id")))
	})
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--scope-header", "X-User-Id")
	if !strings.Contains(p.logs(), "scope=header scope_header=X-User-Id") || strings.Contains(p.logs(), "global scope") {
		t.Fatalf("start-up log does not say keys are scoped by X-User-Id:\n%s", p.logs())
	}
	first := rawSend(t, p.addr, "/pay", `"k1"`, `{"amount":5}`, "X-User-Id: alice")
	wantCode(t, first, 201, "")
	for _, line := range []string{"x-user-id: alice", "X-USER-ID:alice", "X-User-Id: \t alice \t", "X-User-Id:alice   "} {
		r := rawSend(t, p.addr, "/pay", `"k1"`, `{"amount":5}`, line)
		if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || r.body != "for alice" {
			t.Errorf("%q: %d replayed=%q %q; want alice's replay", line, r.status, r.header.Get("Idempotent-Replayed"), r.body)
		}
	}
	if r := rawSend(t, p.addr, "/pay", `"k1"`, `{"amount":5}`, "X-User-Id: Alice"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Alice got alice's response: %d %v", r.status, r.header)
	}
	for _, lines := range [][]string{nil, {"X-User-Id:"}, {"X-User-Id:   "}, {"X-User-Id: alice", "X-User-Id: mallory"}} {
		wantCode(t, rawSend(t, p.addr, "/refused", `"k2"`, `{"amount":5}`, lines...), 401, "scope-missing")
	}
	if n := up.count("/pay"); n != 2 {
		t.Errorf("upstream saw /pay %d times, want 2 (alice and Alice)", n)
	}
	if n := up.count("/refused"); n != 0 {
		t.Errorf("upstream saw %d refused requests", n)
	}
	scopes := map[string]bool{}
	for _, rec := range storeRecords(t, dsn) {
		scopes[rec.Scope+"/"+string(rec.Key)] = true
	}
	if len(scopes) != 2 || !scopes["alice/k1"] || !scopes["Alice/k1"] {
		t.Errorf("records %v, want alice/k1 and Alice/k1", scopes)
	}
}

// testIssuer signs tokens with keys of a JWKS it serves or writes.
type testIssuer struct {
	rsa, rsaOther *rsa.PrivateKey
	ec            *ecdsa.PrivateKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	r1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testIssuer{rsa: r1, rsaOther: r2, ec: ec}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

// jwks is the key set: rsa-1 and ec-1, and rsa-2 (the other RSA key) when
// rotated.
func (is *testIssuer) jwks(t *testing.T, rotated bool) []byte {
	t.Helper()
	pt, err := is.ec.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	keys := []map[string]string{
		rsaJWK("rsa-1", &is.rsa.PublicKey),
		{"kty": "EC", "kid": "ec-1", "use": "sig", "alg": "ES256", "crv": "P-256", "x": b64(pt[1:33]), "y": b64(pt[33:])},
	}
	if rotated {
		keys = append(keys, rsaJWK("rsa-2", &is.rsaOther.PublicKey))
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string, extra ...any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": "https://idp.test", "sub": sub, "aud": "payments",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// TestProxyScopeJWT runs the proxy with --scope-jwt against a key set in
// a file and one served over HTTP: two tokens of one subject share a scope
// (the second replays), two subjects never replay each other, and every
// token that must not authenticate gets 401 scope-unauthenticated with a
// Bearer challenge, before anything reaches the upstream or the store.
func TestProxyScopeJWT(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.jwks(t, false), 0o600); err != nil {
		t.Fatal(err)
	}
	var rotated atomic.Bool
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.jwks(t, rotated.Load()))
	}))
	t.Cleanup(jwksSrv.Close)
	for name, jwks := range map[string]string{"file": file, "url": jwksSrv.URL + "/.well-known/jwks.json"} {
		t.Run(name, func(t *testing.T) {
			up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"charged":true}`))
			})
			dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
			p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--scope-jwt", "--jwks", jwks, "--jwt-audience", "payments")
			bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

			alice1 := sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "jti", "1"))
			alice2 := sign(t, jwt.SigningMethodES256, "ec-1", is.ec, claims("alice", "jti", "2", "iat", time.Now().Add(-time.Minute).Unix()))
			bob := sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("bob"))
			wantCode(t, send(t, "POST", p.url("/pay"), `"k1"`, `{"amount":5}`, bearer(alice1)...), 201, "")
			r := send(t, "POST", p.url("/pay"), `"k1"`, `{"amount":5}`, bearer(alice2)...)
			if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("alice's refreshed token did not replay: %d %v %s", r.status, r.header, r.body)
			}
			r = send(t, "POST", p.url("/pay"), `"k1"`, `{"amount":5}`, bearer(bob)...)
			if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("bob got alice's response: %d %v", r.status, r.header)
			}
			if n := up.count("/pay"); n != 2 {
				t.Fatalf("upstream saw /pay %d times, want 2 (alice once, bob once)", n)
			}
			want := map[string]bool{"alice": true, "bob": true}
			if name == "url" {
				// The issuer rotates to a new key: a token naming it makes the
				// proxy fetch the key set again (at once the first time, then
				// at most every five minutes: the library's guard for the
				// issuer), and is accepted.
				rotated.Store(true)
				carol := sign(t, jwt.SigningMethodRS256, "rsa-2", is.rsaOther, claims("carol"))
				wantCode(t, send(t, "POST", p.url("/pay"), `"k1"`, `{"amount":5}`, bearer(carol)...), 201, "")
				want["carol"] = true
			}

			hmacConfusion := sign(t, jwt.SigningMethodHS256, "rsa-1", x509.MarshalPKCS1PublicKey(&is.rsa.PublicKey), claims("alice"))
			none := sign(t, jwt.SigningMethodNone, "", jwt.UnsafeAllowNoneSignatureType, claims("alice"))
			for _, c := range []struct{ name, auth, challenge, reason string }{
				{"no token", "", "Bearer", "no bearer token"},
				{"basic", "Basic YWxpY2U6cHc=", "Bearer", "no bearer token"},
				{"another key", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsaOther, claims("alice")), invalidToken, "not signed by a trusted key"},
				{"unknown kid", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-9", is.rsaOther, claims("alice")), invalidToken, "not signed by a trusted key"},
				{"expired", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "exp", time.Now().Add(-time.Hour).Unix())), invalidToken, "has expired"},
				{"no exp", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, jwt.MapClaims{"sub": "alice", "aud": "payments"}), invalidToken, "no exp claim"},
				{"not yet", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "nbf", time.Now().Add(time.Hour).Unix())), invalidToken, "not valid yet"},
				{"audience", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "aud", "billing")), invalidToken, "another audience"},
				{"alg none", "Bearer " + none, invalidToken, "not signed by a trusted key"},
				{"alg none, no signature dot", "Bearer " + strings.TrimSuffix(none, "."), invalidToken, "malformed"},
				{"HS256 with the public key", "Bearer " + hmacConfusion, invalidToken, "not signed by a trusted key"},
				{"RS256 naming the EC key", "Bearer " + sign(t, jwt.SigningMethodRS256, "ec-1", is.rsa, claims("alice")), invalidToken, "not signed by a trusted key"},
				{"no sub", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, jwt.MapClaims{"aud": "payments", "exp": time.Now().Add(time.Hour).Unix()}), invalidToken, `no \"sub\" claim`},
				{"lower-case scheme, bad token", "bearer " + alice1[:len(alice1)-4] + "AAAA", invalidToken, "not signed by a trusted key"},
			} {
				var hdr []string
				if c.auth != "" {
					hdr = []string{"Authorization", c.auth}
				}
				r := send(t, "POST", p.url("/refused"), `"k-`+strings.ReplaceAll(c.name, " ", "-")+`"`, `{"amount":5}`, hdr...)
				if r.status != 401 || !strings.Contains(r.body, "#scope-unauthenticated\"") || !strings.Contains(r.body, c.reason) {
					t.Errorf("%s: %d %s; want 401 scope-unauthenticated saying %q", c.name, r.status, r.body, c.reason)
				}
				if got := r.header.Get("WWW-Authenticate"); got != c.challenge {
					t.Errorf("%s: WWW-Authenticate %q, want %q", c.name, got, c.challenge)
				}
			}
			if n := up.count("/refused"); n != 0 {
				t.Errorf("upstream saw %d refused requests", n)
			}
			recs := storeRecords(t, dsn)
			if len(recs) != len(want) {
				t.Errorf("%d records, want %d (k1 of each principal)", len(recs), len(want))
			}
			for _, rec := range recs {
				if rec.Key != "k1" || !want[rec.Scope] {
					t.Errorf("record %s/%s, want only k1 of %v", rec.Scope, rec.Key, want)
				}
			}

		})
	}
}

const invalidToken = `Bearer error="invalid_token"`

// --scope-claim iss,sub: one subject name at two issuers is two principals.
func TestProxyScopeJWTIssuerAndSubject(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, is.jwks(t, false), 0o600); err != nil {
		t.Fatal(err)
	}
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--scope-jwt", "--jwks", file, "--scope-claim", "iss, sub")
	one := sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "iss", "https://one.test"))
	one2 := sign(t, jwt.SigningMethodES256, "ec-1", is.ec, claims("alice", "iss", "https://one.test", "jti", "x"))
	two := sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice", "iss", "https://two.test"))
	for _, tok := range []string{one, one2, two} {
		wantCode(t, send(t, "POST", p.url("/pay"), `"k"`, `{}`, "Authorization", "Bearer "+tok), 201, "")
	}
	if n := up.count("/pay"); n != 2 {
		t.Fatalf("upstream saw %d, want 2 (one per issuer)", n)
	}
	got := map[string]bool{}
	for _, rec := range storeRecords(t, dsn) {
		got[rec.Scope] = true
	}
	if !got[`["https://one.test","alice"]`] || !got[`["https://two.test","alice"]`] {
		t.Fatalf("scopes %v", got)
	}
}

// --digest-secret-file: a proxy started again on the same store (or a
// replica) with the same secret names the differing fields of a record the
// first one made; with its own random secret it names none, rather than
// every field. In the global scope no fields are named at all.
func TestProxyDigestSecretAcrossProcesses(t *testing.T) {
	t.Parallel()
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	secret := filepath.Join(t.TempDir(), "digest-secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--upstream", up.URL, "--store", dsn, "--scope-header", "X-User-Id", "--spool", ""}
	p1 := startProxy(t, append(args, "--digest-secret-file", secret)...)
	wantCode(t, send(t, "POST", p1.url("/pay"), `"k"`, `{"amount":5,"to":"DE89"}`, "X-User-Id", "alice"), 201, "")
	fields := func(p *proc) []string {
		t.Helper()
		r := send(t, "POST", p.url("/pay"), `"k"`, `{"amount":6,"to":"DE89"}`, "X-User-Id", "alice")
		wantCode(t, r, 422, "key-mismatch")
		var pr struct{ Fields []string }
		if err := json.Unmarshal([]byte(r.body), &pr); err != nil {
			t.Fatal(err)
		}
		return pr.Fields
	}
	if got := fields(p1); strings.Join(got, ",") != "amount" {
		t.Fatalf("first proxy: fields %v, want [amount]", got)
	}
	_ = p1.cmd.Process.Kill()
	<-p1.exited
	p2 := startProxy(t, append(args, "--digest-secret-file", secret)...)
	if got := fields(p2); strings.Join(got, ",") != "amount" {
		t.Fatalf("restarted with the same secret: fields %v, want [amount]", got)
	}
	_ = p2.cmd.Process.Kill()
	<-p2.exited
	p3 := startProxy(t, args...)
	if got := fields(p3); len(got) != 0 {
		t.Fatalf("restarted with a random secret: fields %v, want none", got)
	}
	_ = p3.cmd.Process.Kill()
	<-p3.exited
	g := startProxy(t, "--upstream", up.URL, "--store", dsn, "--global-scope", "--spool", "", "--digest-secret-file", secret)
	wantCode(t, send(t, "POST", g.url("/pay"), `"g"`, `{"amount":5,"to":"DE89"}`), 201, "")
	if r := send(t, "POST", g.url("/pay"), `"g"`, `{"amount":6,"to":"DE89"}`); r.status != 422 || strings.Contains(r.body, `"fields"`) {
		t.Fatalf("global scope: %d %s, want a 422 without fields", r.status, r.body)
	}
}
