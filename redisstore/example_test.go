package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
)

// The store runs on a go-redis client the application owns (a standalone
// client here; a Sentinel or Cluster client works the same way). Closing
// the store leaves the client open. The example needs a Redis server, so
// it is compiled but not run.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()

	store, err := redisstore.New(client, redisstore.Config{Prefix: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	engine, err := idem.New(store, idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()

	res, err := engine.DoBytes(context.Background(), idem.Request{Scope: "acct-42", Key: "charge:v1:order-123:1"},
		func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
			return []byte(`{"charged":500}`), nil // the effect, run once per key
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value), res.Replayed)
}
