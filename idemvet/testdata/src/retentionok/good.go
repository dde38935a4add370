package retentionok

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The README: a TTL covering the named windows.
func readme() (*idem.Engine, error) {
	return idem.New(nil, idem.Config{TTL: 8 * 24 * time.Hour, Cover: map[string]time.Duration{
		"dead-letter replay": 7 * 24 * time.Hour,
		"client retry chain": 24 * time.Hour,
	}})
}

// A JetStream consumer whose redelivery ends inside the TTL.
func jetstream(js nats.JetStreamContext) {
	js.AddConsumer("ORDERS", &nats.ConsumerConfig{Durable: "billing", MaxDeliver: 5, AckWait: 30 * time.Second})
}

// BackOff that ends inside the TTL.
func backoff() nats.ConsumerConfig {
	return nats.ConsumerConfig{MaxDeliver: 4, BackOff: []time.Duration{time.Second, time.Minute, time.Hour}}
}

// A dead-letter stream kept shorter than the TTL.
func dlq() nats.StreamConfig {
	return nats.StreamConfig{Name: "ORDERS_DLQ", MaxAge: 3 * 24 * time.Hour}
}

// A queue with a message TTL but no dead-lettering: expired messages are
// dropped, not redelivered.
func amqpTTL(ch *amqp.Channel) {
	ch.QueueDeclare("events", true, false, false, false, amqp.Table{"x-message-ttl": int64(30 * 24 * 3600 * 1000)})
	ch.Consume("events", "", false, false, false, false, nil)
}

// An idem consumer with the engine's windows named.
func idemConsumer() {
	e, _ := idem.New(nil, idem.Config{TTL: 8 * 24 * time.Hour, Cover: map[string]time.Duration{"jetstream redelivery": 7 * 24 * time.Hour}})
	_, _ = consumer.New(consumer.Config{Engine: e}, nil)
}

// A TTL that is not a constant is not judged.
func flag(ttl time.Duration) idem.Config {
	return idem.Config{TTL: ttl, Cover: map[string]time.Duration{"dead-letter replay": 7 * 24 * time.Hour}}
}
