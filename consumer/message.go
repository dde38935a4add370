package consumer

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
)

// Message is a broker-neutral view of one delivery.
type Message struct {
	// ID is the message id set by the publisher (Nats-Msg-Id, AMQP
	// message-id, a webhook's event id). It is the default key.
	ID string
	// Source names where the message was consumed from: "stream/consumer"
	// for JetStream, the queue for AMQP. It is the default scope, so two
	// consumers with different effects never share records.
	Source string
	// Subject is the subject or routing key the message was published to.
	Subject string
	// Headers holds the message's headers (first value of each).
	Headers map[string]string
	// Body is the payload.
	Body []byte
	// Delivery counts deliveries of this message, 1 for the first; 0 when
	// the broker does not say.
	Delivery int
}

// Handler performs a message's effect. Return nil when the effect is done;
// an error wrapped with [idem.Release] when nothing happened and the message
// may be redelivered; an error wrapped with [idem.Unknown] when the effect
// may or may not have happened; any other error when it failed (recorded,
// dead-lettered, never re-run).
type Handler func(ctx context.Context, m *Message) error

// KeyFunc returns the key of a message's intent.
type KeyFunc func(m *Message) (idem.Key, error)

// ScopeFunc returns the scope of a message's key.
type ScopeFunc func(m *Message) string

// FingerprintFunc returns the fingerprint of a message's payload.
type FingerprintFunc func(m *Message) idem.Fingerprint

// ErrNoKey is returned by a [KeyFunc] when the message carries no key.
var ErrNoKey = errors.New("consumer: message has no key")

// MessageID is the default [KeyFunc]: the message's ID.
func MessageID(m *Message) (idem.Key, error) {
	if m.ID == "" {
		return "", ErrNoKey
	}
	return idem.ParseKey(m.ID)
}

// HeaderKey returns a [KeyFunc] that reads the key from header name.
func HeaderKey(name string) KeyFunc {
	return func(m *Message) (idem.Key, error) {
		v := m.Headers[name]
		if v == "" {
			return "", ErrNoKey
		}
		return idem.ParseKey(v)
	}
}

// BodyFingerprint is the default [FingerprintFunc]: SHA-256 of the body.
func BodyFingerprint(m *Message) idem.Fingerprint { return idem.NewFingerprint(m.Body) }

// SourceScope is the default [ScopeFunc]: the message's Source.
func SourceScope(m *Message) string { return m.Source }
