package redelivery

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/nats-io/nats.go"
)

// The default TTL (24h) against MaxDeliver × AckWait.
func redelivery(js nats.JetStreamContext) {
	js.AddConsumer("ORDERS", &nats.ConsumerConfig{Durable: "billing", MaxDeliver: 100, AckWait: time.Hour})
	_, _ = idem.New(nil, idem.Config{Lease: time.Second, Cover: nil}) // want `TTL 1d is shorter than the JetStream redelivery window \(MaxDeliver 100 × AckWait 1h0m0s\)`
}
