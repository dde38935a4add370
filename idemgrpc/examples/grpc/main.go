// Command grpc is a payment service behind idemgrpc, and a client that
// calls it through a lossy network: the server applies the first attempt
// but its answer is lost, grpc-go's retry policy sends the call again with
// the same key, and the retry is answered from the record instead of
// charging twice. Run it with
//
//	go run ./examples/grpc
//
// from the idemgrpc module. It listens on 127.0.0.1 (a free port) and
// keeps its records in memory.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"github.com/idemkit/idem/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// payments charges accounts; charges counts the effects.
type payments struct {
	testpb.UnimplementedPaymentsServer
	charges atomic.Int64
}

func (p *payments) Charge(ctx context.Context, req *testpb.ChargeRequest) (*testpb.ChargeResponse, error) {
	n := p.charges.Add(1)
	// A real handler forwards idemgrpc.AttemptFrom(ctx).ForwardKey() to
	// its payment provider.
	return &testpb.ChargeResponse{Id: fmt.Sprintf("ch_%d", n), Amount: req.GetAmount(), Currency: req.GetCurrency()}, nil
}

// loseFirstAnswer applies the first call and then loses its answer, as a
// connection reset after the server did the work would.
func loseFirstAnswer() grpc.UnaryServerInterceptor {
	var lost atomic.Bool
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if lost.CompareAndSwap(false, true) {
			return nil, status.Error(codes.Unavailable, "connection reset")
		}
		return resp, err
	}
}

// retryPolicy retries Charge on UNAVAILABLE. Charge is not idempotent by
// itself, so the client interceptor is told it requires a key.
const retryPolicy = `{"methodConfig": [{
  "name": [{"service": "idem.test.v1.Payments", "method": "Charge"}],
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "1s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

func main() {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	protect, err := idemgrpc.UnaryServerInterceptor(eng, idemgrpc.Config{
		// One internal client: one namespace. A server with many
		// principals scopes keys by them (idemgrpc.TLSPeerScope).
		Scope: idemgrpc.GlobalScope,
		Rules: []idemgrpc.Rule{{Pattern: "/idem.test.v1.Payments/Charge", Requirement: idemgrpc.Required}},
	})
	if err != nil {
		log.Fatal(err)
	}
	svc := &payments{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(loseFirstAnswer(), protect))
	testpb.RegisterPaymentsServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	keys, err := idemgrpc.UnaryClientInterceptor(idemgrpc.ClientConfig{
		Rules: []idemgrpc.Rule{{Pattern: "/idem.test.v1.Payments/Charge", Requirement: idemgrpc.Required}},
	})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(retryPolicy),
		grpc.WithUnaryInterceptor(keys))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewPaymentsClient(conn)

	// The key names the intent — charge order 42 — once, before the call.
	ctx := idemgrpc.WithKey(context.Background(), idem.MustDeriveKey("charge", 1, "order-42"))
	req := &testpb.ChargeRequest{Account: "acct_1", Amount: 1000, Currency: "EUR"}
	var trailer metadata.MD
	resp, err := client.Charge(ctx, req, grpc.Trailer(&trailer))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("charged %s (replayed: %v); charges made: %d\n", resp.GetId(), trailer.Get(idemgrpc.ReplayedTrailer), svc.charges.Load())

	// The same key with another amount is a client bug, refused.
	_, err = client.Charge(ctx, &testpb.ChargeRequest{Account: "acct_1", Amount: 5000, Currency: "EUR"})
	fmt.Printf("same key, other amount: %s %s\n", status.Code(err), idemgrpc.Reason(err))

	// Without a key the client does not send Charge at all.
	_, err = client.Charge(context.Background(), req)
	fmt.Printf("no key: %s; charges made: %d\n", status.Code(err), svc.charges.Load())
}
