package backoff

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/nats-io/nats.go"
)

// BackOff: 1m, 1h, then 12h repeated.
func backoff() idem.Config {
	_ = nats.ConsumerConfig{MaxDeliver: 5, BackOff: []time.Duration{time.Minute, time.Hour, 12 * time.Hour}}
	return idem.Config{TTL: 12 * time.Hour, Cover: map[string]time.Duration{}} // want `TTL 12h0m0s is shorter than the JetStream redelivery window \(BackOff over MaxDeliver 5\)`
}
