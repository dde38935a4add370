package idemhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ScopeFunc returns the scope of a request's key: the authenticated
// principal (user, tenant, API key id). Uniqueness is on (scope, key), so
// one principal is never served another's recorded response. An error
// refuses the request with 401 before anything is claimed: an
// [*UnauthenticatedError] as scope-unauthenticated with its
// WWW-Authenticate challenge, any other error as scope-missing.
//
// The scope must name the principal, not carry its credential: a bearer
// token changes on every refresh, and a scope taken from it would give a
// retry after a refresh a new namespace, in which the effect runs again.
// Use [TrustedHeaderScope] behind a gateway that authenticates, or
// [BearerScope] with a verifier of the token.
type ScopeFunc func(r *http.Request) (string, error)

// GlobalScope puts every key in one namespace shared by all callers. A
// server opts in to it explicitly, by passing it as Config.Scope, when its
// callers are trusted to choose unique keys (for example a single internal
// client). The global scope is the empty scope; a 422 key-mismatch in it
// names no differing fields, since any caller could compare its own body
// with another's field by field.
func GlobalScope(*http.Request) (string, error) { return "", nil }

// ErrNoScope is returned (possibly wrapped) by the scope functions of this
// package when the request carries no principal: the header is absent,
// empty or repeated, or there is no bearer token.
var ErrNoScope = errors.New("idemhttp: no principal to scope the key by")

// HeaderScope scopes keys by the value of a request header that carries a
// credential stable per principal, such as an API key header. The value is
// stored as its SHA-256 in hex, never in clear. A request without the
// header is refused.
//
// Do not use it with Authorization and bearer tokens: a refreshed token
// (or "bearer" for "Bearer", or one more space) is another scope, in which
// a retry runs again. Use [BearerScope] for tokens and [TrustedHeaderScope]
// for a principal set by a gateway.
func HeaderScope(name string) ScopeFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Values(name)
		if len(v) != 1 || v[0] == "" {
			return "", ErrNoScope
		}
		sum := sha256.Sum256([]byte(v[0]))
		return hex.EncodeToString(sum[:]), nil
	}
}

// TrustedHeaderScope scopes keys by the principal a trusted gateway in
// front of the server names in header name (for example X-User-Id, set
// after the gateway authenticated the request). The value, with spaces
// and tabs around it trimmed, is the scope as it is: compared byte for
// byte (user-1 and User-1 are two principals) and stored in clear, so it
// should be an identifier, not a secret.
//
// A request without the header, with an empty value or with the header
// repeated is refused with 401 scope-missing (the error wraps
// [ErrNoScope]): a repeated header means a client's own value got past
// the gateway. The header must never be client-controlled: the gateway
// has to remove any copy the client sent before setting its own, or any
// client can name any principal and replay its responses.
func TrustedHeaderScope(name string) ScopeFunc {
	name = http.CanonicalHeaderKey(name)
	repeated := fmt.Errorf("%w: header %s is repeated", ErrNoScope, name)
	return func(r *http.Request) (string, error) {
		v := r.Header[name]
		switch len(v) {
		case 0:
			return "", ErrNoScope
		case 1:
		default:
			return "", repeated
		}
		s := strings.Trim(v[0], " \t")
		if s == "" {
			return "", ErrNoScope
		}
		return s, nil
	}
}

// UnauthenticatedError refuses a request whose credentials do not
// authenticate it: the middleware answers 401 scope-unauthenticated with
// a WWW-Authenticate header, before anything is claimed. A [ScopeFunc] or
// a [TokenVerifier] returns one to choose the challenge and the reason
// the client reads.
type UnauthenticatedError struct {
	// Challenge is the WWW-Authenticate value. Defaults to "Bearer".
	Challenge string
	// Reason is the problem's detail, read by the client: it must not
	// repeat the credential. Defaults to "the request is not
	// authenticated".
	Reason string
	// Err is the cause, for errors.Is and As; it is not shown to the
	// client.
	Err error
}

func (e *UnauthenticatedError) Error() string {
	msg := "idemhttp: unauthenticated: " + e.reason()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *UnauthenticatedError) Unwrap() error { return e.Err }

func (e *UnauthenticatedError) challenge() string {
	if e.Challenge == "" {
		return "Bearer"
	}
	return e.Challenge
}

func (e *UnauthenticatedError) reason() string {
	if e.Reason == "" {
		return "the request is not authenticated"
	}
	return e.Reason
}

// TokenVerifier verifies a bearer token — its signature, expiry and
// audience, with a JOSE library of the caller's choice — and returns its
// claims. An error refuses the request with 401: an
// [*UnauthenticatedError] says why to the client, any other error gets a
// generic reason. ctx is the request's.
type TokenVerifier func(ctx context.Context, token string) (map[string]any, error)

// InvalidTokenChallenge is the WWW-Authenticate challenge for a bearer
// token that is present but not valid (RFC 6750, section 3.1).
const InvalidTokenChallenge = `Bearer error="invalid_token"`

// BearerScope scopes keys by claims of the request's verified bearer
// token (Authorization: Bearer TOKEN; the scheme's case and the spaces
// after it do not matter). The scope is the value of the claim, "sub"
// when none is named, so a refreshed token of the same subject keeps its
// scope; with several claims (for example "iss" and "sub", when tokens
// come from several issuers) it is the JSON array of their values,
// ["https://issuer.example","user-1"]. Each claim must be a non-empty
// string. The scope is stored in clear.
//
// A request without a token, with a token verify refuses or without the
// claims is refused with 401 scope-unauthenticated and a WWW-Authenticate
// Bearer challenge, before anything is claimed. BearerScope panics if
// verify is nil.
func BearerScope(verify TokenVerifier, claims ...string) ScopeFunc {
	if verify == nil {
		panic("idemhttp: BearerScope: verify is nil")
	}
	if len(claims) == 0 {
		claims = []string{"sub"}
	}
	claims = append([]string(nil), claims...)
	return func(r *http.Request) (string, error) {
		token, err := BearerToken(r.Header)
		if err != nil {
			return "", &UnauthenticatedError{Challenge: "Bearer", Reason: "no bearer token: send Authorization: Bearer TOKEN", Err: err}
		}
		got, err := verify(r.Context(), token)
		if err != nil {
			var ue *UnauthenticatedError
			if errors.As(err, &ue) {
				return "", err
			}
			return "", &UnauthenticatedError{Challenge: InvalidTokenChallenge, Reason: "the bearer token is not valid", Err: err}
		}
		return scopeFromClaims(got, claims)
	}
}

func scopeFromClaims(got map[string]any, claims []string) (string, error) {
	vals := make([]string, len(claims))
	for i, c := range claims {
		s, ok := got[c].(string)
		if !ok || s == "" {
			return "", &UnauthenticatedError{Challenge: InvalidTokenChallenge,
				Reason: fmt.Sprintf("the bearer token has no %q claim to scope the key by", c), Err: ErrNoScope}
		}
		vals[i] = s
	}
	if len(vals) == 1 {
		return vals[0], nil
	}
	b, err := json.Marshal(vals)
	return string(b), err
}

// BearerToken returns the token of the one Authorization header of h, of
// the Bearer scheme (in any case, followed by one or more spaces). It
// returns an error wrapping [ErrNoScope] when there is none, the header is
// repeated or of another scheme, or the token is not a token68 (RFC 9110).
func BearerToken(h http.Header) (string, error) {
	v := h["Authorization"]
	if len(v) != 1 {
		if len(v) == 0 {
			return "", ErrNoScope
		}
		return "", fmt.Errorf("%w: Authorization is repeated", ErrNoScope)
	}
	scheme, rest, ok := strings.Cut(strings.Trim(v[0], " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization is not of the Bearer scheme", ErrNoScope)
	}
	token := strings.TrimLeft(rest, " ")
	if !isToken68(token) {
		return "", fmt.Errorf("%w: the bearer token is malformed", ErrNoScope)
	}
	return token, nil
}

// isToken68 reports whether s is a token68: 1*( ALPHA / DIGIT / "-" / "."
// / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	i := 0
	for i < len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			i++
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
