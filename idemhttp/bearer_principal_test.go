package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/idemkit/idem/idemhttp"
)

// TestBearerScopeRefusesAnEmptyPrincipal: a verified token whose principal
// claim is the empty string names no principal. Accepting it would put
// every such caller (tokens of another issuer's service accounts, a
// misconfigured identity provider) in one scope, where each replays the
// others' recorded responses. It is refused like a token without the
// claim, alone or as one of several claims.
func TestBearerScopeRefusesAnEmptyPrincipal(t *testing.T) {
	t.Parallel()
	verify := func(_ context.Context, token string) (map[string]any, error) {
		return map[string]any{"iss": "https://idp.example", "sub": ""}, nil
	}
	for _, claims := range [][]string{nil, {"sub"}, {"iss", "sub"}} {
		scope := idemhttp.BearerScope(verify, claims...)
		r, _ := http.NewRequest(http.MethodPost, "/charges", nil)
		r.Header.Set("Authorization", "Bearer a.b.c")
		s, err := scope(r)
		var ue *idemhttp.UnauthenticatedError
		if !errors.As(err, &ue) || !errors.Is(err, idemhttp.ErrNoScope) || ue.Challenge != idemhttp.InvalidTokenChallenge {
			t.Errorf("claims %v: scope %q, err %v; want an *UnauthenticatedError (invalid_token) wrapping ErrNoScope", claims, s, err)
		}
	}
}
