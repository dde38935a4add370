package unkeyedretry

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/idemkit/idem"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/paymentintent"
)

// The key derived once and sent on every attempt.
func keyedBackoff(ctx context.Context, orderID string, body []byte) error {
	key, err := idem.DeriveKey("charge", 1, orderID)
	if err != nil {
		return err
	}
	return backoff.Retry(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", string(key))
		_, err = http.DefaultClient.Do(req)
		return err
	}, backoff.NewExponentialBackOff())
}

// go-retryablehttp with the caller's key.
func keyedRetryable(ctx context.Context, key string, body []byte) error {
	req, err := retryablehttp.NewRequestWithContext(ctx, "POST", "https://api.example.com/charges", body)
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	_, err = retryablehttp.NewClient().Do(req)
	return err
}

// Reads are safe to retry.
func retryGet(ctx context.Context) error {
	_, err := retryablehttp.NewClient().Get("https://api.example.com/charges")
	return err
}

// stripe with its IdempotencyKey set from the order.
func keyedStripe(orderID string, amount int64) error {
	return backoff.Retry(func() error {
		p := &stripe.PaymentIntentParams{Amount: stripe.Int64(amount)}
		p.IdempotencyKey = stripe.String("pi:v1:" + orderID)
		_, err := paymentintent.New(p)
		return err
	}, backoff.NewExponentialBackOff())
}

// The README's idem.Do: the provider sees a.ForwardKey() on every attempt.
func readme(ctx context.Context, e *idem.Engine, key idem.Key, body []byte) error {
	_, _, err := idem.Do(ctx, e, idem.Request{Key: key}, func(ctx context.Context, a *idem.Attempt) (int, error) {
		return 0, backoff.Retry(func() error {
			req, err := http.NewRequestWithContext(ctx, "POST", "https://api.example.com/charges", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Idempotency-Key", a.ForwardKey())
			_, err = http.DefaultClient.Do(req)
			return err
		}, backoff.NewExponentialBackOff())
	})
	return err
}

// A loop that sends one request per item is not a retry.
func fanOut(ctx context.Context, c *http.Client, items [][]byte) error {
	for _, it := range items {
		req, err := http.NewRequestWithContext(ctx, "POST", "https://api.example.com/events", bytes.NewReader(it))
		if err != nil {
			return err
		}
		if _, err := c.Do(req); err != nil {
			return err
		}
	}
	return nil
}

// A polling loop of GETs.
func poll(ctx context.Context, c *http.Client) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/status", nil)
	for i := 0; i < 10; i++ {
		if _, err := c.Do(req); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return nil
}
