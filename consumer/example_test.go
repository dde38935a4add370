package consumer_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
	"github.com/idemkit/idem/memstore"
)

// The broker redelivers a message (the first ack was lost): the handler
// runs once, and the redelivery is acknowledged as a replay.
func ExampleProcessor_Process() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	p, err := consumer.New(consumer.Config{Engine: engine}, func(ctx context.Context, m *consumer.Message) error {
		fmt.Printf("sending receipt for %s\n", m.Body) // the effect
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A broker adapter builds a Message from each delivery; the key is the
	// publisher's message id and the scope is where it was consumed from.
	m := &consumer.Message{ID: "order-42", Source: "ORDERS/receipts", Body: []byte("order-42")}
	ctx := context.Background()
	for delivery := 1; delivery <= 2; delivery++ {
		m.Delivery = delivery
		d := p.Process(ctx, m)
		// The adapter acks, retries or dead-letters as the decision says.
		fmt.Println("delivery", delivery, d.Action, d.Outcome)
	}
	// Output:
	// sending receipt for order-42
	// delivery 1 ack first
	// delivery 2 ack replay
}
