package idemgrpc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// retryConfig retries Charge on UNAVAILABLE, up to 3 attempts.
const retryConfig = `{"methodConfig": [{
  "name": [{"service": "idem.test.v1.Payments", "method": "Charge"}],
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// loseFirstAnswer runs the first attempt through the rest of the chain —
// idemgrpc and the handler: the effect happens — and then answers
// Unavailable in its place, as a connection lost after the server applied
// the call would. It records the key each attempt carried.
type loseFirstAnswer struct {
	mu   sync.Mutex
	keys []string
	n    atomic.Int64
}

func (l *loseFirstAnswer) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	l.mu.Lock()
	l.keys = append(l.keys, md.Get(idemgrpc.MetadataKey)...)
	l.mu.Unlock()
	resp, err := handler(ctx, req)
	if l.n.Add(1) == 1 {
		return nil, status.Error(codes.Unavailable, "connection lost after the call was applied")
	}
	return resp, err
}

func TestClientRetriesShareOneKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		lose := &loseFirstAnswer{}
		e := newEnv(t, open(t), &payments{}, setup{
			before: []grpc.UnaryServerInterceptor{lose.intercept},
			dial:   []grpc.DialOption{grpc.WithDefaultServiceConfig(retryConfig)},
		})
		resp, rep, err := e.charge(t, "pay:v1:7", chargeReq)
		if err != nil {
			t.Fatalf("the service config's retry did not recover the lost answer: %v", err)
		}
		if !rep || resp.GetId() != "ch_1" {
			t.Fatalf("retry answered %v, replayed %v; want the replay of ch_1", resp, rep)
		}
		lose.mu.Lock()
		keys := lose.keys
		lose.mu.Unlock()
		if len(keys) != 2 || keys[0] != keys[1] || keys[0] != `"pay:v1:7"` {
			t.Fatalf("attempts carried keys %q, want one key on both attempts", keys)
		}
		if n := e.svc.calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times over the retries, want 1", n)
		}
	})
}

func TestClientRefusesRequiredWithoutKey(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{
		ccfg: idemgrpc.ClientConfig{Rules: []idemgrpc.Rule{{Pattern: chargeMethod, Requirement: idemgrpc.Required}}},
		dial: []grpc.DialOption{grpc.WithDefaultServiceConfig(retryConfig)},
	})
	_, _, err := e.charge(t, "", chargeReq)
	if !errors.Is(err, idemgrpc.ErrKeyRequired) || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("got %v, want ErrKeyRequired as FailedPrecondition", err)
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("the call was sent: handler ran %d times", n)
	}
	// With a key it goes.
	if _, _, err := e.charge(t, "k1", chargeReq); err != nil {
		t.Fatal(err)
	}
	// Other methods are not Required.
	if _, err := e.client.Refund(context.Background(), &testpb.RefundRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestClientKeepsExplicitMetadata(t *testing.T) {
	var seen []string
	e := newEnv(t, memstoreFor(t), &payments{}, setup{before: []grpc.UnaryServerInterceptor{
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			seen = md.Get(idemgrpc.MetadataKey)
			return h(ctx, req)
		}}})
	ctx := metadata.AppendToOutgoingContext(idemgrpc.WithKey(context.Background(), "from-context"), idemgrpc.MetadataKey, "explicit")
	if _, err := e.client.Charge(ctx, chargeReq); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "explicit" {
		t.Fatalf("server saw %q, want the explicit key alone", seen)
	}
}

func TestClientRefusesInvalidKey(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{})
	_, _, err := e.charge(t, "bad\x01key", chargeReq)
	if !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("got %v, want ErrInvalidKey", err)
	}
	if n := e.svc.calls.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
}
