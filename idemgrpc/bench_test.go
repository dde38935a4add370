package idemgrpc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
)

// The cost of idemgrpc on a unary call over bufconn with the in-memory
// store: a call without the interceptor's work (no key), a first call
// (claim, handler, record) and a replay.
func BenchmarkUnary(b *testing.B) {
	for _, mode := range []string{"no key", "first", "replay"} {
		b.Run(mode, func(b *testing.B) {
			e := benchEnv(b)
			ctx := context.Background()
			if mode == "replay" {
				ctx = idemgrpc.WithKey(ctx, "bench")
				if _, err := e.client.Charge(ctx, chargeReq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c := ctx
				if mode == "first" {
					c = idemgrpc.WithKey(ctx, idem.Key(fmt.Sprintf("bench-%d", i)))
				}
				if _, err := e.client.Charge(c, chargeReq); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
