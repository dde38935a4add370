package idemlambda

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func newEngine(t *testing.T, st idem.Store, cfg idem.Config) *idem.Engine {
	t.Helper()
	eng, err := idem.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

func memEngine(t *testing.T) (*idem.Engine, *memstore.Store) {
	st := memstore.New()
	return newEngine(t, st, idem.Config{}), st
}

func newHTTP(t *testing.T, cfg Config) *HTTP {
	t.Helper()
	w, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// v2Event is an HTTP API event for POST /transfers by principal sub.
func v2Event(key, body, sub string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /transfers", RawPath: "/transfers", Body: body,
		Headers: map[string]string{"content-type": "application/json"},
	}
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	ev.RequestContext.HTTP.Method = "POST"
	if sub != "" {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
		}
	}
	return ev
}

// invocation is a context as the Lambda runtime gives one: a deadline at
// the function's timeout.
func invocation(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
