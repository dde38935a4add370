package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"github.com/idemkit/idem/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// exampleServer serves the test service behind idemgrpc's server
// interceptor (cfg, over an in-memory store) on an in-memory listener, and
// returns a client of it through the client interceptor (ccfg) and a stop
// function.
func exampleServer(cfg idemgrpc.Config, svc testpb.PaymentsServer, ccfg idemgrpc.ClientConfig) (testpb.PaymentsClient, func()) {
	eng, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	interceptor, err := idemgrpc.UnaryServerInterceptor(eng, cfg)
	if err != nil {
		log.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(interceptor))
	testpb.RegisterPaymentsServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	cic, err := idemgrpc.UnaryClientInterceptor(ccfg)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///example",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(cic))
	if err != nil {
		log.Fatal(err)
	}
	return testpb.NewPaymentsClient(conn), func() { conn.Close(); srv.Stop(); eng.Close() }
}

// The second call with the same key is answered from the record: the
// handler ran once, and the trailer says it was a replay.
func ExampleUnaryServerInterceptor() {
	svc := &payments{}
	client, stop := exampleServer(idemgrpc.Config{
		Scope: idemgrpc.GlobalScope, // or idemgrpc.TLSPeerScope, idemgrpc.MetadataScope(...)
		Rules: []idemgrpc.Rule{{Pattern: "/idem.test.v1.Payments/", Requirement: idemgrpc.Required}},
	}, svc, idemgrpc.ClientConfig{})
	defer stop()

	ctx := idemgrpc.WithKey(context.Background(), idem.MustDeriveKey("charge", 1, "order-42"))
	for range 2 {
		var trailer metadata.MD
		resp, err := client.Charge(ctx, &testpb.ChargeRequest{Account: "acct_1", Amount: 1000, Currency: "EUR"}, grpc.Trailer(&trailer))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(resp.GetId(), "replayed:", trailer.Get(idemgrpc.ReplayedTrailer))
	}
	fmt.Println("handler runs:", svc.calls.Load())
	// Output:
	// ch_1 replayed: []
	// ch_1 replayed: [true]
	// handler runs: 1
}

// The client refuses to send a call to a non-idempotent method without a
// key, so that no retry can apply it twice.
func ExampleUnaryClientInterceptor() {
	client, stop := exampleServer(idemgrpc.Config{Scope: idemgrpc.GlobalScope}, &payments{}, idemgrpc.ClientConfig{
		Rules: []idemgrpc.Rule{{Pattern: "/idem.test.v1.Payments/Charge", Requirement: idemgrpc.Required}},
	})
	defer stop()
	_, err := client.Charge(context.Background(), &testpb.ChargeRequest{Amount: 1000})
	fmt.Println(errors.Is(err, idemgrpc.ErrKeyRequired), status.Code(err))
	// Output: true FailedPrecondition
}

// A key reused with a different request is refused, naming the fields
// that differ.
func ExampleReason() {
	client, stop := exampleServer(idemgrpc.Config{Scope: idemgrpc.GlobalScope}, &payments{}, idemgrpc.ClientConfig{})
	defer stop()
	ctx := idemgrpc.WithKey(context.Background(), "k-1")
	_, _ = client.Charge(ctx, &testpb.ChargeRequest{Account: "acct_1", Amount: 1000})
	_, err := client.Charge(ctx, &testpb.ChargeRequest{Account: "acct_1", Amount: 5000})
	fmt.Println(status.Code(err), idemgrpc.Reason(err))
	// Output: FailedPrecondition KEY_MISMATCH
}
