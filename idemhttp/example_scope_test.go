package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// Behind a gateway that authenticates callers and sets X-User-Id (after
// removing any copy the client sent), keys are scoped by that header: the
// same key from two users is two requests, and each user's retry replays
// their own response.
func ExampleTrustedHeaderScope() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()
	mw, err := idemhttp.New(engine, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id")})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged for %s", r.Header.Get("X-User-Id"))
	}))
	for _, user := range []string{"user-1", "user-2", " user-1 ", ""} {
		r := post("order-42", `{"amount": 5000}`)
		if user != "" {
			r.Header.Set("X-User-Id", user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%q: %d replayed=%q %s\n", user, w.Code, w.Header().Get(idemhttp.ReplayedHeader), strings.SplitN(w.Body.String(), ",", 2)[0])
	}
	// Output:
	// "user-1": 201 replayed="" charged for user-1
	// "user-2": 201 replayed="" charged for user-2
	// " user-1 ": 201 replayed="true" charged for user-1
	// "": 401 replayed="" {"type":"https://github.com/idemkit/idem/blob/main/docs/http.md#scope-missing"
}

// Keys scoped by the subject of a verified bearer token. verify stands for
// a JOSE library's verification of the signature, expiry and audience
// (idem proxy --scope-jwt uses github.com/golang-jwt/jwt/v5 with a JWKS);
// here two tokens of one subject, say before and after a refresh, share a
// scope, and an expired token is refused with 401 before anything is
// claimed.
func ExampleBearerScope() {
	tokens := map[string]map[string]any{
		"token-a":  {"sub": "user-1"},
		"token-a2": {"sub": "user-1"}, // user-1's token after a refresh
		"token-b":  {"sub": "user-2"},
	}
	verify := func(_ context.Context, token string) (map[string]any, error) {
		if claims, ok := tokens[token]; ok {
			return claims, nil
		}
		return nil, &idemhttp.UnauthenticatedError{Challenge: idemhttp.InvalidTokenChallenge, Reason: "the token has expired"}
	}
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()
	mw, err := idemhttp.New(engine, idemhttp.Config{Scope: idemhttp.BearerScope(verify, "sub")})
	if err != nil {
		fmt.Println(err)
		return
	}
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	for _, token := range []string{"token-a", "token-a2", "token-b", "expired"} {
		r := post("order-42", `{"amount": 5000}`)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d replayed=%q challenge=%q\n", token, w.Code, w.Header().Get(idemhttp.ReplayedHeader), w.Header().Get("WWW-Authenticate"))
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// token-a: 201 replayed="" challenge=""
	// token-a2: 201 replayed="true" challenge=""
	// token-b: 201 replayed="" challenge=""
	// expired: 401 replayed="" challenge="Bearer error=\"invalid_token\""
	// handler runs: 2
}
