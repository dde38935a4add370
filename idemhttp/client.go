package idemhttp

import (
	"context"
	"net/http"

	"github.com/idemkit/idem"
)

type keyCtxKey struct{}

// WithKey returns a context carrying the intent's key. A [Transport] or
// [Retrier] attaches it to every attempt of requests made with the context.
// Derive the key from the intent (see [idem.DeriveKey]), once, before the
// first attempt; never per attempt.
func WithKey(ctx context.Context, key idem.Key) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// KeyFrom returns the key set by [WithKey], or "".
func KeyFrom(ctx context.Context) idem.Key {
	k, _ := ctx.Value(keyCtxKey{}).(idem.Key)
	return k
}

// Transport is an http.RoundTripper that sets the Idempotency-Key header
// from the request context's key ([WithKey]) on every request it sends, so
// that every attempt of one intent carries the same key. A request that
// already has the header keeps it.
type Transport struct {
	// Base sends the requests. Defaults to http.DefaultTransport.
	Base http.RoundTripper
	// Bare sends the key unquoted, for servers that compare the raw header
	// value (many Stripe-style APIs). Defaults to false: the key is sent as
	// a structured-field string ("abc"), as the IETF draft specifies.
	Bare bool
}

// RoundTrip implements http.RoundTripper. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if k := KeyFrom(req.Context()); k != "" && req.Header.Get(HeaderName) == "" {
		if err := idem.ValidateKey(string(k)); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Header.Set(HeaderName, t.format(k))
	}
	return base.RoundTrip(req)
}

func (t *Transport) format(k idem.Key) string {
	if t.Bare {
		return string(k)
	}
	return FormatKeyHeader(k)
}
