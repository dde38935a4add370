package idemgrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type keyCtxKey struct{}

// WithKey returns a context carrying the intent's key. The client
// interceptor sends it on every attempt of calls made with the context.
// Derive the key from the intent (see [idem.DeriveKey]), once, before the
// first call; never per attempt.
func WithKey(ctx context.Context, key idem.Key) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// KeyFrom returns the key set by [WithKey], or "".
func KeyFrom(ctx context.Context) idem.Key {
	k, _ := ctx.Value(keyCtxKey{}).(idem.Key)
	return k
}

// ErrKeyRequired reports a call the client interceptor refused to send:
// its method is Required by ClientConfig.Rules and it carries no key. See
// [KeyRequiredError].
var ErrKeyRequired = errors.New("idemgrpc: refusing to send a non-idempotent call without an idempotency key")

// KeyRequiredError names the method of a refused call. Its gRPC status is
// FailedPrecondition, so status.Code reports that too.
type KeyRequiredError struct {
	Method string
}

func (e *KeyRequiredError) Error() string {
	return fmt.Sprintf("idemgrpc: refusing to send %s without an idempotency key: it is not idempotent, and a retry could apply it twice", e.Method)
}

// Is reports ErrKeyRequired.
func (e *KeyRequiredError) Is(target error) bool { return target == ErrKeyRequired }

// GRPCStatus returns the error as a FailedPrecondition status.
func (e *KeyRequiredError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.Error())
}

// ClientConfig configures [UnaryClientInterceptor].
type ClientConfig struct {
	// Rules declare which methods are Required: a call to one without a
	// key is refused before it is sent, with a [*KeyRequiredError]. Only
	// Pattern and Requirement are read. Defaults to none: every call is
	// sent, with the key when it has one.
	Rules []Rule
}

// UnaryClientInterceptor returns an interceptor that sends the key of
// the call's context ([WithKey]) as idempotency-key metadata, formatted as
// a structured-field string. A call that already carries the metadata
// keeps it. An invalid key is refused before the call is sent, with an
// error matching idem.ErrInvalidKey. A call without a key to a method
// ClientConfig.Rules declare Required is refused before it is sent. It
// fails when a rule is invalid.
//
// The key is set in the outgoing metadata once, before the call, and
// grpc-go's retries (the service config's retryPolicy, and transparent
// retries) resend the same metadata on every attempt: every attempt of
// one call carries one key, so the server runs the effect at most once
// however many attempts reach it. A retryPolicy makes grpc-go retry
// whatever its "name" list selects, idempotent or not; list every
// method it retries that is not idempotent by itself as Required here, so
// that no call to it is sent, and then retried, without a key.
func UnaryClientInterceptor(cfg ClientConfig) (grpc.UnaryClientInterceptor, error) {
	if err := validateRules("ClientConfig", cfg.Rules); err != nil {
		return nil, err
	}
	rules := cfg.Rules
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, err := attachKey(ctx, method, rules)
		if err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}, nil
}

// attachKey returns ctx with the call's key in its outgoing metadata, or
// the refusal of a Required call without one.
func attachKey(ctx context.Context, method string, rules []Rule) (context.Context, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	if vs := md.Get(MetadataKey); len(vs) > 0 {
		if _, err := KeyFromMetadata(md); err != nil {
			return ctx, err
		}
		return ctx, nil
	}
	k := KeyFrom(ctx)
	if k == "" {
		if ru := firstMatch(rules, method); ru != nil && ru.Requirement == Required {
			return ctx, &KeyRequiredError{Method: method}
		}
		return ctx, nil
	}
	if err := idem.ValidateKey(string(k)); err != nil {
		return ctx, err
	}
	return metadata.AppendToOutgoingContext(ctx, MetadataKey, idemhttp.FormatKeyHeader(k)), nil
}
