package nocover

import (
	"time"

	"github.com/idemkit/idem"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A consumer and no Cover at all.
func noCover(ch *amqp.Channel) {
	ch.Consume("charges", "", false, false, false, false, nil)
	_, _ = idem.New(nil, idem.Config{TTL: 30 * 24 * time.Hour}) // want `idem.Config has no Cover although this package sets up an AMQP consumer`
}
