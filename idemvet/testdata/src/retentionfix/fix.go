package retentionfix

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/nats-io/nats.go"
)

func setup(js nats.JetStreamContext) (*idem.Engine, error) {
	js.AddConsumer("ORDERS", &nats.ConsumerConfig{Durable: "billing", MaxDeliver: 10, AckWait: time.Minute})
	return idem.New(nil, idem.Config{TTL: 72 * time.Hour}) // want `has no Cover`
}
