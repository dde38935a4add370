package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWKSUnknownKidDoesNotStarveANewKey: tokens with made-up key ids
// cost at most one key-set fetch per unknownEvery and, repeated, none; a
// key the issuer adds afterwards is accepted as soon as unknownEvery has
// passed since the last such fetch — not after keyfunc's five-minute
// window that one made-up kid used to spend.
func TestJWKSUnknownKidDoesNotStarveANewKey(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	var rotated atomic.Bool
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.jwks(t, rotated.Load()))
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := newJWTVerifierURL(ctx, srv.URL, "payments", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cache := jwksCacheOf(t, v)
	cache.mu.Lock()
	cache.unknownEvery = time.Second
	cache.mu.Unlock()
	// Tokens are signed before the clock matters: signing is slow under -race.
	madeUp := sign(t, jwt.SigningMethodRS256, "made-up", is.rsaOther, claims("alice"))
	var fresh []string
	for i := range 20 {
		fresh = append(fresh, sign(t, jwt.SigningMethodRS256, "fresh-"+string(rune('a'+i)), is.rsaOther, claims("alice")))
	}
	rotatedIn := sign(t, jwt.SigningMethodRS256, "rsa-2", is.rsaOther, claims("alice"))
	check := func(tok string) error {
		_, err := v.verify(ctx, tok)
		return err
	}
	verify := func(kid string, key any) error {
		return check(sign(t, jwt.SigningMethodRS256, kid, key, claims("alice")))
	}
	if err := verify("rsa-1", is.rsa); err != nil {
		t.Fatalf("a known key: %v", err)
	}
	// An attacker's made-up kid, then the same kid again and again: one
	// fetch, then none (negative-cached).
	base := served.Load()
	for range 20 {
		if err := check(madeUp); err == nil {
			t.Fatal("a made-up kid was accepted")
		}
	}
	if n := served.Load() - base; n != 1 {
		t.Fatalf("a repeated made-up kid cost %d fetches, want 1", n)
	}
	// A burst of fresh made-up kids within unknownEvery: no more fetches.
	for _, tok := range fresh {
		_ = check(tok)
	}
	if n := served.Load() - base; n != 1 {
		t.Fatalf("made-up kids within unknownEvery cost %d fetches, want 1", n)
	}
	// The issuer rotates in rsa-2. Its first token within unknownEvery of
	// the last fetch may be refused; once unknownEvery has passed it is
	// accepted.
	rotated.Store(true)
	time.Sleep(1100 * time.Millisecond)
	// unknownEvery has passed: the made-up kid, negative-cached after
	// its lookup, still costs no fetch.
	before := served.Load()
	if err := check(madeUp); err == nil {
		t.Fatal("a made-up kid was accepted")
	}
	if n := served.Load() - before; n != 0 {
		t.Fatalf("a negative-cached kid cost %d fetches, want 0", n)
	}
	if err := check(rotatedIn); err != nil {
		t.Fatalf("the issuer's new key, after unknownEvery: %v", err)
	}
}

// jwksCacheOf returns the jwksCache behind v.
func jwksCacheOf(t *testing.T, v *jwtVerifier) *jwksCache {
	t.Helper()
	c, ok := v.keys.Storage().(*jwksCache)
	if !ok {
		t.Fatalf("the verifier's storage is %T, not the proxy's cache", v.keys.Storage())
	}
	return c
}
