package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/idemkit/idem/idemhttp"
)

// The proxy verifies bearer tokens with github.com/golang-jwt/jwt/v5, the
// most used JOSE library in Go, small and with no dependencies of its own,
// and github.com/MicahParks/keyfunc/v3, the JWKS helper its maintainers
// point to, with its key set storage github.com/MicahParks/jwkset: it
// fetches a key set from a URL and refuses a key whose "alg" is not the
// token's. The refresh policy (hourly, and on an unknown key id with a
// per-kid negative cache) is jwksCache's.
// Nothing here parses or checks a JWS by hand. (lestrrat-go/jwx/v3 would
// do as well; it is one larger library with more dependencies, which the
// proxy does not need.) This code lives in cmd/idem so the root module
// stays stdlib-only; a Go server uses idemhttp.BearerScope with a verifier
// built from the same two calls, or from any other JOSE library.

// jwtMethods are the signing algorithms accepted: asymmetric ones only.
// "none" is never accepted, nor HS256/384/512, whose "public" key would be
// a shared secret: a key set that signs tokens holds public keys.
var jwtMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// jwtLeeway is the clock skew tolerated on exp and nbf.
const jwtLeeway = 30 * time.Second

// jwtVerifier verifies bearer tokens against a key set.
type jwtVerifier struct {
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
}

func newJWTParser(audience string) *jwt.Parser {
	opts := []jwt.ParserOption{jwt.WithValidMethods(jwtMethods), jwt.WithExpirationRequired(), jwt.WithLeeway(jwtLeeway)}
	if audience != "" {
		opts = append(opts, jwt.WithAudience(audience))
	}
	return jwt.NewParser(opts...)
}

// newJWTVerifierJSON verifies tokens against the key set in b (a JWKS
// document), read once.
func newJWTVerifierJSON(b []byte, audience string) (*jwtVerifier, error) {
	k, err := keyfunc.NewJWKSetJSON(b)
	if err != nil {
		return nil, fmt.Errorf("--jwks: not a JSON Web Key Set: %w", err)
	}
	if keys, err := k.Storage().KeyReadAll(context.Background()); err != nil || len(keys) == 0 {
		return nil, errors.New("--jwks: the key set holds no usable key")
	}
	return &jwtVerifier{keys: k, parser: newJWTParser(audience)}, nil
}

// newJWTVerifierURL verifies tokens against the key set served at u:
// fetched now (an error if it cannot be), then refreshed in the background
// until ctx ends, and on an unknown key id within the limits of
// [jwksCache].
func newJWTVerifierURL(ctx context.Context, u, audience string, log *slog.Logger) (*jwtVerifier, error) {
	keys, err := newJWKSCache(ctx, u, log)
	if err != nil {
		return nil, fmt.Errorf("--jwks %s: %w", u, err)
	}
	k, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: keys})
	if err != nil {
		return nil, fmt.Errorf("--jwks %s: %w", u, err)
	}
	return &jwtVerifier{keys: k, parser: newJWTParser(audience)}, nil
}

// verify is an idemhttp.TokenVerifier: the token's signature by a key of
// the set, with an accepted algorithm matching the key, its exp (required)
// and nbf, and its audience when one is configured.
func (v *jwtVerifier) verify(ctx context.Context, token string) (map[string]any, error) {
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.keys.KeyfuncCtx(ctx)); err != nil {
		return nil, &idemhttp.UnauthenticatedError{Challenge: idemhttp.InvalidTokenChallenge, Reason: jwtReason(err), Err: err}
	}
	return claims, nil
}

// jwtReason says to the client why its token was refused, without
// details that would help forge one.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the bearer token is malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the bearer token is not signed by a trusted key with an accepted algorithm"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the bearer token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the bearer token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the bearer token is for another audience"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the bearer token has no exp claim"
	}
	return "the bearer token is not valid"
}
