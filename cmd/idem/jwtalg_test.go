package main

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestProxyScopeJWTAcceptsOnlyAsymmetricAlgorithms: the key set an issuer
// publishes can hold a symmetric ("oct") key — by mistake, or because a
// library publishes every key it has — and keys without an "alg" member.
// A token signed HS256 with such a key, with or without a kid naming it,
// must still be refused: the proxy accepts asymmetric algorithms only,
// whatever the key set holds. A token whose sub is the empty string names
// no principal and is refused too (all such callers would share one
// scope). A correct token on the same key set is accepted, so the refusals
// are the algorithm's and the claim's, not the key set's.
func TestProxyScopeJWTAcceptsOnlyAsymmetricAlgorithms(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	rsa := rsaJWK("rsa-1", &is.rsa.PublicKey)
	delete(rsa, "alg")
	set, err := json.Marshal(map[string]any{"keys": []map[string]string{
		rsa,
		{"kty": "oct", "kid": "oct-1", "use": "sig", "k": b64(secret)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charged":true}`))
	})
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "idem.db")
	p := startProxy(t, "--upstream", up.URL, "--store", dsn, "--scope-jwt", "--jwks", file, "--jwt-audience", "payments")

	alice := sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("alice"))
	wantCode(t, send(t, "POST", p.url("/pay"), `"k-ok"`, `{"amount":5}`, "Authorization", "Bearer "+alice), http.StatusCreated, "")

	for _, c := range []struct{ name, token, reason string }{
		{"HS256 with the oct key, kid named", sign(t, jwt.SigningMethodHS256, "oct-1", secret, claims("mallory")), "accepted algorithm"},
		{"HS256 with the oct key, no kid", sign(t, jwt.SigningMethodHS256, "", secret, claims("mallory")), "accepted algorithm"},
		{"HS512 with the oct key", sign(t, jwt.SigningMethodHS512, "oct-1", secret, claims("mallory")), "accepted algorithm"},
		{"empty sub", sign(t, jwt.SigningMethodRS256, "rsa-1", is.rsa, claims("")), `no \"sub\" claim`},
	} {
		r := send(t, "POST", p.url("/refused"), `"k-`+strings.ReplaceAll(c.name, " ", "-")+`"`, `{"amount":5}`, "Authorization", "Bearer "+c.token)
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "#scope-unauthenticated\"") || !strings.Contains(r.body, c.reason) {
			t.Errorf("%s: %d %s; want 401 scope-unauthenticated saying %q", c.name, r.status, r.body, c.reason)
		}
	}
	if n := up.count("/refused"); n != 0 {
		t.Errorf("the upstream saw %d refused requests", n)
	}
	for _, rec := range storeRecords(t, dsn) {
		if rec.Key != "k-ok" || rec.Scope != "alice" {
			t.Errorf("record %q/%q; want only alice's k-ok", rec.Scope, rec.Key)
		}
	}
}
