package unkeyedretry

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/avast/retry-go/v4"
	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-retryablehttp"
	goretry "github.com/sethvargo/go-retry"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/paymentintent"
)

func retryable(ctx context.Context, body []byte) error {
	c := retryablehttp.NewClient()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", body) // want `this POST with go-retryablehttp, which retries it, carries no Idempotency-Key`
	if err != nil {
		return err
	}
	_, err = c.Do(req)
	return err
}

func retryablePost(body []byte) error {
	_, err := retryablehttp.NewClient().Post("https://api.example.com/emails", "application/json", body) // want `this POST with go-retryablehttp`
	return err
}

func withBackoff(ctx context.Context, body []byte) error {
	return backoff.Retry(func() error {
		req, err := http.NewRequestWithContext(ctx, "PUT", "https://api.example.com/orders/1", bytes.NewReader(body)) // want `this PUT retried by backoff.Retry carries no idempotency key`
		if err != nil {
			return err
		}
		_, err = http.DefaultClient.Do(req)
		return err
	}, backoff.NewExponentialBackOff())
}

func withAvast(body []byte) error {
	return retry.Do(func() error {
		_, err := http.Post("https://api.example.com/payouts", "application/json", bytes.NewReader(body)) // want `this POST retried by retry.Do`
		return err
	}, retry.Attempts(5))
}

func withSethvargo(ctx context.Context, amount int64) error {
	return goretry.Do(ctx, goretry.NewExponential(time.Second), func(ctx context.Context) error {
		_, err := paymentintent.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(amount)}) // want `the provider call paymentintent.New retried by retry.Do`
		return goretry.RetryableError(err)
	})
}

func send(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "https://api.example.com/subscriptions/1", nil) // want `this DELETE retried by backoff.Retry`
	_, err := http.DefaultClient.Do(req)
	return err
}

func namedOperation(ctx context.Context) error {
	return backoff.Retry(func() error { return send(ctx) }, backoff.NewExponentialBackOff())
}

func byName(ctx context.Context, body []byte) error {
	op := func() error {
		_, err := http.Post("https://api.example.com/sms", "text/plain", bytes.NewReader(body)) // want `this POST retried by backoff.Retry`
		return err
	}
	return backoff.Retry(op, backoff.NewExponentialBackOff())
}

func loop(ctx context.Context, c *http.Client, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "PATCH", "https://api.example.com/accounts/1", bytes.NewReader(body))
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 3; attempt++ {
		resp, err := c.Do(req) // want `this PATCH retried by this loop carries no Idempotency-Key`
		if err == nil && resp.StatusCode < 500 {
			return nil
		}
		time.Sleep(time.Duration(attempt) * time.Second)
	}
	return err
}
