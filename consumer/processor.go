package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Processor runs one message's effect at most once and says what to do with
// the delivery. It is safe for concurrent use; adapters call Process from
// several workers.
type Processor struct {
	cfg Config
	run runner
}

// runner runs req's effect for m through the engine (plain, or inside a
// transaction).
type runner func(ctx context.Context, req idem.Request, m *Message) (idem.Result, error)

// New returns a processor that runs h under cfg.Engine.
func New(cfg Config, h Handler) (*Processor, error) {
	if h == nil {
		return nil, errors.New("consumer: New: handler is nil")
	}
	return NewValue(cfg, func(ctx context.Context, m *Message) ([]byte, error) { return nil, h(ctx, m) })
}

// ValueHandler is a [Handler] whose success has a value to record: what
// the effect produced (an id from the provider, the messages to publish
// downstream). A redelivery replays it in [Decision].Value without running
// the handler.
type ValueHandler func(ctx context.Context, m *Message) ([]byte, error)

// NewValue returns a processor that runs h under cfg.Engine and records
// its value with the outcome.
func NewValue(cfg Config, h ValueHandler) (*Processor, error) {
	if h == nil {
		return nil, errors.New("consumer: NewValue: handler is nil")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &Processor{cfg: cfg}
	p.run = func(ctx context.Context, req idem.Request, m *Message) (idem.Result, error) {
		return p.cfg.Engine.DoBytes(ctx, req, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
			v, err := h(ctx, m)
			if err != nil && errors.Is(err, idem.ErrReleased) && p.last(m) {
				return nil, giveUp(m, err)
			}
			return v, err
		})
	}
	return p, nil
}

// Config returns the processor's configuration with defaults filled in.
func (p *Processor) Config() Config { return p.cfg }

// Process handles one delivery and returns what the adapter must do with it.
// It never panics because of the handler: a handler panic leaves the record
// unknown (the engine records it) and the delivery is retried, which then
// goes through recovery or parking.
func (p *Processor) Process(ctx context.Context, m *Message) (d Decision) {
	d.Scope = p.cfg.Scope(m)
	key, err := p.cfg.Key(m)
	if err != nil {
		return p.deadLetter(ctx, d, ReasonInvalidKey, nil, err)
	}
	d.Key = key
	req := idem.Request{Scope: d.Scope, Key: key, Fingerprint: p.cfg.Fingerprint(m),
		Operation: p.cfg.Operation, Policy: p.cfg.Policy}
	defer func() {
		if r := recover(); r != nil {
			p.cfg.Logger.ErrorContext(ctx, "consumer: handler panicked; record left unknown",
				"scope", d.Scope, "key_hash", keyHash(d.Scope, d.Key), "panic", fmt.Sprint(r))
			d = p.retry(d, idem.OutcomeUnknown, 0, fmt.Errorf("consumer: handler panicked: %v", r))
		}
	}()
	res, err := p.run(ctx, req, m)
	return p.decide(ctx, d, req, m, res, err, true)
}

// last reports whether m is on its last allowed delivery.
func (p *Processor) last(m *Message) bool {
	return p.cfg.MaxDeliveries > 0 && m.Delivery >= p.cfg.MaxDeliveries
}

// giveUp turns a "nothing happened, retry" error into a plain failure, so a
// poison message is recorded failed and dead-lettered rather than looping.
func giveUp(m *Message, err error) error {
	return fmt.Errorf("consumer: gave up after %d deliveries: %s", m.Delivery, err.Error())
}
