package amqpretry

import (
	"time"

	"github.com/idemkit/idem"
	amqp "github.com/rabbitmq/amqp091-go"
)

// An AMQP retry queue that dead-letters back after two days.
func amqpRetry(ch *amqp.Channel) idem.Config {
	ch.QueueDeclare("charges.retry", true, false, false, false, amqp.Table{
		"x-dead-letter-exchange": "charges",
		"x-message-ttl":          int64(48 * 3600 * 1000),
	})
	return idem.Config{TTL: 36 * time.Hour, Cover: map[string]time.Duration{"retry": time.Hour}} // want `TTL 36h0m0s is shorter than the AMQP dead-letter x-message-ttl`
}
