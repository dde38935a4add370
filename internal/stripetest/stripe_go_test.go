package stripetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v85"
)

// profile is one way of running the proxy in front of the upstream.
type profile struct {
	name string
	args []string
	// stripe: --compat stripe. reject: --in-flight reject, the control
	// that shows what the default wait fixes.
	stripe, reject bool
}

var profiles = []profile{
	{name: "stripe", args: []string{"--compat", "stripe"}, stripe: true},
	{name: "ietf"},
	// The control's upstream bound is long enough for its slowest charge.
	{name: "reject", args: []string{"--compat", "stripe", "--in-flight", "reject", "--upstream-timeout", "10s"}, stripe: true, reject: true},
}

// proxyArgs are the flags every profile shares: the set-up (one
// client, so one global scope) with a 3 s upstream bound.
func proxyArgs(u *upstream, pr profile) []string {
	return append([]string{"--global-scope", "--upstream", u.URL, "--upstream-timeout", "3s"}, pr.args...)
}

// goClient is a stripe-go client of the proxy whose HTTP calls time out
// after timeout and which retries twice on its own (MaxNetworkRetries).
func goClient(p *proxy, timeout time.Duration) *stripe.Client {
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(p.url),
		HTTPClient:        &http.Client{Timeout: timeout},
		MaxNetworkRetries: stripe.Int64(2),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient("sk_test_idem", stripe.WithBackends(&stripe.Backends{API: b, Connect: b, Uploads: b, MeterEvents: b}))
}

// charge creates a charge for order (amount 1000 usd unless changed)
// with key (the SDK's own when ""), the upstream taking delay.
func charge(ctx context.Context, sc *stripe.Client, order, key string, delay time.Duration, change func(*stripe.ChargeCreateParams)) (*stripe.Charge, error) {
	p := &stripe.ChargeCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd")}
	p.AddMetadata("order", order)
	if delay > 0 {
		p.AddMetadata("delay_ms", fmt.Sprint(delay.Milliseconds()))
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	if change != nil {
		change(p)
	}
	return sc.V1Charges.Create(ctx, p)
}

// goOutcome names what stripe-go made of a call: the charge, or the
// typed error it raised.
func goOutcome(ch *stripe.Charge, err error) string {
	var se *stripe.Error
	switch {
	case err == nil:
		return fmt.Sprintf("*stripe.Charge %s (replayed=%s)", ch.ID, ch.LastResponse.Header.Get("Idempotent-Replayed"))
	case errors.As(err, &se):
		return fmt.Sprintf("%T %d %s/%s", se.Err, se.HTTPStatusCode, se.Type, se.Code)
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// wantGoError fails unless err is a stripe error whose typed error is
// of want's type, with status and code — and under the stripe profile a
// RequestID — and returns it.
func wantGoError[T error](t *testing.T, pr profile, err error, status int, code string) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	var want T
	if !errors.As(err, &se) || !errors.As(err, &want) || se.HTTPStatusCode != status || string(se.Code) != code {
		t.Fatalf("stripe-go: %s; want %T %d %s", goOutcome(nil, err), want, status, code)
	}
	if pr.stripe && se.RequestID == "" {
		t.Errorf("stripe-go: %T without a RequestID (no Request-Id header)", want)
	}
	return se
}

// TestStripeGo runs stripe-go v85 through the built proxy under each
// profile.
func TestStripeGo(t *testing.T) {
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t)
			p := startProxy(t, proxyArgs(u, pr)...)
			run := func(name string, f func(t *testing.T, order string) string) {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					order := "go-" + pr.name + "-" + name
					outcome := f(t, order)
					t.Logf("stripe-go %-6s %-10s %s; upstream charges: %d", pr.name, name, outcome, u.effects(order))
				})
			}
			run("timeout", func(t *testing.T, order string) string { return goTimeout(t, p, u, pr, order) })
			run("concurrent", func(t *testing.T, order string) string { return goConcurrent(t, p, u, pr, order) })
			if pr.reject {
				return // the control covers what the wait changes
			}
			run("mismatch", func(t *testing.T, order string) string { return goMismatch(t, p, u, pr, order) })
			run("replay", func(t *testing.T, order string) string { return goReplay(t, p, u, pr, order) })
			run("unknown", func(t *testing.T, order string) string { return goUnknown(t, p, u, pr, order) })
			run("fix", func(t *testing.T, order string) string { return goFix(t, p, u, pr, order) })
		})
	}
}

// goTimeout: the SDK's HTTP call times out (1 s) while the upstream
// charges (1.8 s, 2.5 s for the control), and the SDK retries with its
// own generated key. Waiting, the retry gets the charge; rejected, it
// gets 409, which stripe-go raises at once.
func goTimeout(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	delay := 1800 * time.Millisecond
	if pr.reject {
		delay = 2500 * time.Millisecond
	}
	ch, err := charge(context.Background(), goClient(p, time.Second), order, "", delay, nil)
	if pr.reject {
		wantGoError[*stripe.IdempotencyError](t, pr, err, http.StatusConflict, "idempotency_key_in_use")
	} else if err != nil || ch.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("stripe-go after a timeout and its own retry: %s; want the charge, replayed", goOutcome(ch, err))
	}
	wantEffects(t, u, order, 1)
	return goOutcome(ch, err)
}

// goConcurrent: a second call with the key while the first is with the
// upstream (1.5 s).
func goConcurrent(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	sc := goClient(p, 10*time.Second)
	var first *stripe.Charge
	var firstErr error
	var wg sync.WaitGroup
	wg.Go(func() { first, firstErr = charge(context.Background(), sc, order, order, 1500*time.Millisecond, nil) })
	u.waitArrival(t, order)
	second, err := charge(context.Background(), sc, order, order, 1500*time.Millisecond, nil)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("first call: %s", goOutcome(first, firstErr))
	}
	if pr.reject {
		se := wantGoError[*stripe.IdempotencyError](t, pr, err, http.StatusConflict, "idempotency_key_in_use")
		if se.LastResponse.Header.Get("Retry-After") == "" {
			t.Error("an in-flight 409 without Retry-After")
		}
	} else if err != nil || second.ID != first.ID || second.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("concurrent duplicate: %s; want %s replayed", goOutcome(second, err), first.ID)
	}
	wantEffects(t, u, order, 1)
	return goOutcome(second, err)
}

// goMismatch: the key again with another amount.
func goMismatch(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	sc := goClient(p, 10*time.Second)
	if ch, err := charge(context.Background(), sc, order, order, 0, nil); err != nil {
		t.Fatalf("first call: %s", goOutcome(ch, err))
	}
	ch, err := charge(context.Background(), sc, order, order, 0, func(c *stripe.ChargeCreateParams) { c.Amount = stripe.Int64(2000) })
	if pr.stripe {
		wantGoError[*stripe.IdempotencyError](t, pr, err, http.StatusBadRequest, "idempotency_key_mismatch")
	} else {
		wantGoError[*stripe.InvalidRequestError](t, pr, err, http.StatusUnprocessableEntity, "idempotency_key_mismatch")
	}
	wantEffects(t, u, order, 1)
	return goOutcome(ch, err)
}

// goReplay: the key again with the same parameters, the SDK encoding
// them as it does.
func goReplay(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	sc := goClient(p, 10*time.Second)
	first, err := charge(context.Background(), sc, order, order, 0, nil)
	if err != nil {
		t.Fatalf("first call: %s", goOutcome(first, err))
	}
	second, err := charge(context.Background(), sc, order, order, 0, nil)
	if err != nil || second.ID != first.ID || second.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s; want %s replayed", goOutcome(second, err), first.ID)
	}
	lr := second.LastResponse
	if lr.RequestID != first.LastResponse.RequestID {
		t.Errorf("replay RequestID %q, want the upstream's %q", lr.RequestID, first.LastResponse.RequestID)
	}
	if pr.stripe && (lr.IdempotencyKey != order || lr.Header.Get("Stripe-Version") != stripeVersion) {
		t.Errorf("replay IdempotencyKey %q, Stripe-Version %q; want %q, %q", lr.IdempotencyKey, lr.Header.Get("Stripe-Version"), order, stripeVersion)
	}
	wantEffects(t, u, order, 1)
	return goOutcome(second, err) + fmt.Sprintf(", IdempotencyKey %q, RequestID %q", lr.IdempotencyKey, lr.RequestID)
}

// goUnknown: the upstream takes longer (4 s) than --upstream-timeout
// (3 s): the outcome is unknown. The first call ends in an api_error the
// SDK does not retry, and a later one with the key in an idempotency
// error that says so, without Retry-After.
func goUnknown(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	sc := goClient(p, 10*time.Second)
	_, err := charge(context.Background(), sc, order, order, 4*time.Second, nil)
	wantGoError[*stripe.APIError](t, pr, err, http.StatusGatewayTimeout, "upstream_timeout")
	ch, err := charge(context.Background(), sc, order, order, 4*time.Second, nil)
	se := wantGoError[*stripe.IdempotencyError](t, pr, err, http.StatusConflict, "idempotency_outcome_unknown")
	if h := se.LastResponse.Header; h.Get("Retry-After") != "" || h.Get("Stripe-Should-Retry") != "false" {
		t.Errorf("unknown outcome: Retry-After %q, Stripe-Should-Retry %q; want none, false", h.Get("Retry-After"), h.Get("Stripe-Should-Retry"))
	}
	wantEffects(t, u, order, 1)
	return goOutcome(ch, err)
}

// goFix: a call that fails the upstream's validation (no currency), then
// the fixed call with the same key. Stripe saves no result for the
// first; neither does the stripe profile.
func goFix(t *testing.T, p *proxy, u *upstream, pr profile, order string) string {
	sc := goClient(p, 10*time.Second)
	_, err := charge(context.Background(), sc, order, order, 0, func(c *stripe.ChargeCreateParams) { c.Currency = nil })
	wantGoError[*stripe.InvalidRequestError](t, pr, err, http.StatusBadRequest, "parameter_missing")
	ch, err := charge(context.Background(), sc, order, order, 0, nil)
	if pr.stripe {
		if err != nil || ch.LastResponse.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the fixed call: %s; want a new charge", goOutcome(ch, err))
		}
		wantEffects(t, u, order, 1)
	} else {
		wantGoError[*stripe.InvalidRequestError](t, pr, err, http.StatusUnprocessableEntity, "idempotency_key_mismatch")
		wantEffects(t, u, order, 0)
	}
	return goOutcome(ch, err)
}

// wantEffects fails unless the upstream charged n times for order, after
// any call still under way settled.
func wantEffects(t *testing.T, u *upstream, order string, n int) {
	t.Helper()
	if got := u.effects(order); got != n {
		u.mu.Lock()
		keys := append([]string(nil), u.keys[order]...)
		u.mu.Unlock()
		t.Errorf("the upstream charged %d times for %s, want %d (keys %q)", got, order, n, keys)
	}
}
