package idemlambda

import (
	"errors"
	"fmt"
)

// ErrNoPrincipal is matched (errors.Is) by [PrincipalScope]'s error for a
// request that carries no authenticated principal.
var ErrNoPrincipal = errors.New("idemlambda: the request carries no authenticated principal to scope its key by")

// ScopeFunc returns the scope of a request's key.
type ScopeFunc func(r *Request) (string, error)

// PrincipalScope scopes keys by the principal the request was
// authenticated as (Request.Principal), so that one caller never
// receives another's recorded response. It is the default.
func PrincipalScope(r *Request) (string, error) {
	if r.Principal == "" {
		return "", ErrNoPrincipal
	}
	return r.Principal, nil
}

// GlobalScope puts every key in one namespace: any caller who knows a key
// receives its recorded response. Use it only where the key itself is
// unguessable and private to its caller.
func GlobalScope(*Request) (string, error) { return "", nil }

// HeaderScope scopes keys by a request header set by a trusted layer in
// front of the function (never by the client); a request without it gets
// 401.
func HeaderScope(name string) ScopeFunc {
	return func(r *Request) (string, error) {
		v := r.Header(name)
		if v == "" {
			return "", fmt.Errorf("%w: header %s is absent", ErrNoPrincipal, name)
		}
		return v, nil
	}
}
