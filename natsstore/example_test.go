package natsstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/natsstore"
)

// The store runs on a NATS connection the application owns; the bucket is
// made once (here by CreateBucket; `idem migrate --store
// nats://host:4222/payments` does the same). Closing the store leaves the
// connection open. The example needs a JetStream cluster, so it is
// compiled but not run.
func ExampleNew() {
	nc, err := nats.Connect("nats://n1:4222,nats://n2:4222,nats://n3:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if err := natsstore.CreateBucket(ctx, nc, natsstore.BucketConfig{Bucket: "payments", Replicas: 3}); err != nil {
		log.Fatal(err)
	}
	store, err := natsstore.New(ctx, nc, natsstore.Config{Bucket: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	engine, err := idem.New(store, idem.Config{})
	if err != nil {
		log.Fatal(err) // refused: a bucket of fewer than 3 replicas, in memory, or with a TTL
	}
	defer engine.Close()

	res, err := engine.DoBytes(ctx, idem.Request{Scope: "acct-42", Key: "charge:v1:order-123:1"},
		func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			return []byte(`{"charged":500}`), nil // the effect, run once per key
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value), res.Replayed)
}
