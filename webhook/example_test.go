package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/webhook"
)

// A provider delivers the same event twice: the effect runs once, and the
// second delivery gets 200 with Idempotent-Replayed, so the provider stops
// redelivering. The same event id with another body is refused with 422.
func ExampleNew() {
	engine, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close()

	shipped := 0
	h, err := webhook.New(webhook.Config{
		Engine:  engine,
		EventID: webhook.JSONField("id"), // the provider's event id, e.g. Stripe's "id"
		Scope:   func(*http.Request) string { return "shipping-provider" },
	}, func(ctx context.Context, ev *webhook.Event) error {
		shipped++ // the effect: mark the order shipped
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h) // in production, behind your signature check
	defer srv.Close()

	deliver := func(body string) {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idem-Outcome"), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}

	deliver(`{"id": "evt_1", "type": "order.shipped", "order": "o-42"}`)
	deliver(`{"id": "evt_1", "type": "order.shipped", "order": "o-42"}`) // redelivery
	deliver(`{"id": "evt_1", "type": "order.shipped", "order": "o-43"}`) // same id, other body
	fmt.Println("shipped:", shipped)
	// Output:
	// 200 succeeded replayed: false
	// 200 succeeded replayed: true
	// 422 mismatch replayed: false
	// shipped: 1
}
