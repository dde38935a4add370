package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// RecoverFunc decides an unknown record by looking at the effect itself
// (a ledger row, a provider lookup by the forwarded key). It returns the
// resolution and decided = true, or decided = false to leave the record
// unknown and park the message. Resolution{Release: true} says the effect
// is absent: the record is released and the handler runs once more in the
// same delivery. Resolution{As: idem.StateSucceeded} says it is present.
type RecoverFunc func(ctx context.Context, m *Message, rec idem.Record) (r idem.Resolution, decided bool, err error)

// Config configures a [Processor].
type Config struct {
	// Engine runs the intents. Required.
	Engine *idem.Engine
	// Key reads a message's key. Defaults to [MessageID].
	Key KeyFunc
	// Scope reads a message's scope. Defaults to [SourceScope].
	Scope ScopeFunc
	// Fingerprint hashes a message's payload. Defaults to [BodyFingerprint].
	Fingerprint FingerprintFunc
	// Operation names the operation in metrics and logs. Defaults to
	// "consume".
	Operation string
	// Policy is passed to the engine. InFlight is always InFlightReject: a
	// consumer never blocks on another's claim, it asks for redelivery.
	// Defaults to the engine's policy.
	Policy idem.Policy
	// RetryDelay is the redelivery delay for ActionRetry when the engine
	// gives no hint. Defaults to 1s.
	RetryDelay time.Duration
	// MaxDeliveries is the delivery at which a handler that still releases
	// (or, in a transaction, fails to commit its effect) is recorded failed
	// and dead-lettered instead of retried. Keep it below the broker's own
	// limit (JetStream MaxDeliver, RabbitMQ x-delivery-limit) so the record
	// is written before the broker drops the message. A negative value
	// means no limit. Messages whose broker reports no delivery count
	// (Delivery 0) are never given up on. Defaults to 5.
	MaxDeliveries int
	// Recover decides unknown records; see [RecoverFunc]. Defaults to none:
	// unknown messages are parked.
	Recover RecoverFunc
	// Logger receives warnings about mismatches, parked and dead-lettered
	// messages; keys are logged as hashes. Defaults to discarding logs.
	Logger *slog.Logger
}

func (c *Config) fill() error {
	if c.Engine == nil {
		return errors.New("consumer: Config.Engine is required")
	}
	if c.Key == nil {
		c.Key = MessageID
	}
	if c.Scope == nil {
		c.Scope = SourceScope
	}
	if c.Fingerprint == nil {
		c.Fingerprint = BodyFingerprint
	}
	if c.Operation == "" {
		c.Operation = "consume"
	}
	c.Policy.InFlight = idem.InFlightReject
	if c.RetryDelay < 0 {
		return fmt.Errorf("consumer: Config.RetryDelay must not be negative, got %s", c.RetryDelay)
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = time.Second
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}
