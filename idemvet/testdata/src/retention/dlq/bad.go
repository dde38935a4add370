package dlq

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/nats-io/nats.go"
)

// The field guide's case: a 24h TTL against a 7-day dead-letter replay.
func dlq(js nats.JetStreamContext) {
	_ = nats.StreamConfig{Name: "ORDERS_DLQ", MaxAge: 7 * 24 * time.Hour}
	_, _ = idem.New(nil, idem.Config{TTL: 24 * time.Hour, Cover: map[string]time.Duration{}}) // want `TTL 1d is shorter than the dead-letter stream "ORDERS_DLQ" replay window \(MaxAge\) \(7d`
}
