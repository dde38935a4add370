package natsconsumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/consumer"
)

// Headers written on dead letters.
const (
	HeaderReason  = "Idem-Reason"  // a consumer.Reason
	HeaderScope   = "Idem-Scope"   // the record's scope
	HeaderError   = "Idem-Error"   // the error behind the decision
	HeaderSubject = "Idem-Subject" // the original subject
)

// Config configures a [Consumer].
type Config struct {
	// Processor runs each message's effect. Required.
	Processor *consumer.Processor
	// DeadLetterSubject receives dead letters; a stream must capture it.
	// Defaults to none (messages are only terminated).
	DeadLetterSubject string
	// Workers is how many messages are processed at once by Run. Defaults
	// to 1.
	Workers int
	// Heartbeat is how often InProgress() is sent while a message is
	// processed; a negative value disables it. Defaults to a third of the
	// consumer's AckWait.
	Heartbeat time.Duration
	// AckTimeout bounds DoubleAck, dead-letter publishes and Nak. Defaults
	// to 5s.
	AckTimeout time.Duration
	// Logger receives ack and dead-letter failures. Defaults to discarding
	// logs.
	Logger *slog.Logger
}

// Consumer settles JetStream deliveries by the processor's decisions.
type Consumer struct {
	js  jetstream.JetStream
	cfg Config
}

// New returns a consumer that publishes dead letters through js.
func New(js jetstream.JetStream, cfg Config) (*Consumer, error) {
	if js == nil || cfg.Processor == nil {
		return nil, errors.New("natsconsumer: New: JetStream and Config.Processor are required")
	}
	if cfg.Workers < 0 || cfg.AckTimeout < 0 {
		return nil, fmt.Errorf("natsconsumer: Config.Workers and Config.AckTimeout must not be negative")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Consumer{js: js, cfg: cfg}, nil
}

// Run pulls from cons until ctx ends, processing up to Workers messages at
// once. It returns nil when ctx ends, after the messages in hand are
// settled.
//
// It pulls with plain Fetch requests (at most one per free worker, each
// waiting up to a second) rather than the Messages iterator: a fetch holds
// no long-lived pull state that a server restart, or an older server's
// answers, could strand.
func (c *Consumer) Run(ctx context.Context, cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	source := info.Stream + "/" + info.Name
	hb := c.cfg.Heartbeat
	if hb == 0 {
		hb = info.Config.AckWait / 3
	}
	sem := make(chan struct{}, c.cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		n := acquire(ctx, sem)
		if n == 0 {
			return nil
		}
		got, err := c.fetch(ctx, cons, n, func(msg jetstream.Msg) {
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				// Settling outlives shutdown: a message in hand is finished.
				c.handle(context.WithoutCancel(ctx), msg, source, hb)
			}()
		})
		for ; got < n; got++ {
			<-sem
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// acquire takes one worker slot (waiting for it) and then every other free
// slot, and returns how many it took; 0 when ctx ended.
func acquire(ctx context.Context, sem chan struct{}) int {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for {
		select {
		case sem <- struct{}{}:
			n++
		default:
			return n
		}
	}
}

// fetch pulls up to n messages and hands each to dispatch; it returns how
// many it dispatched.
func (c *Consumer) fetch(ctx context.Context, cons jetstream.Consumer, n int, dispatch func(jetstream.Msg)) (int, error) {
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		if fctx.Err() != nil {
			return 0, nil
		}
		return 0, fmt.Errorf("natsconsumer: fetch: %w", err)
	}
	got := 0
	for msg := range batch.Messages() {
		dispatch(msg)
		got++
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, fmt.Errorf("natsconsumer: fetch: %w", err)
	}
	return got, nil
}

// Handle processes one message from a consumer whose scope is source
// ("stream/consumer") and settles it, for callers that run their own
// Consume loop. heartbeat is the InProgress interval (≤ 0 disables it).
func (c *Consumer) Handle(ctx context.Context, msg jetstream.Msg, source string, heartbeat time.Duration) consumer.Decision {
	return c.handle(ctx, msg, source, heartbeat)
}

func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg, source string, hb time.Duration) consumer.Decision {
	m := toMessage(msg, source)
	stop := keepAlive(msg, hb)
	d := c.cfg.Processor.Process(ctx, m)
	stop()
	c.settle(ctx, msg, m, d)
	return d
}

func (c *Consumer) settle(ctx context.Context, msg jetstream.Msg, m *consumer.Message, d consumer.Decision) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AckTimeout)
	defer cancel()
	var err error
	switch d.Action {
	case consumer.ActionAck:
		// The record, not this ack, says the effect is done; a lost ack
		// means one redelivery that replays.
		err = msg.DoubleAck(actx)
	case consumer.ActionDeadLetter:
		err = c.deadLetter(actx, msg, m, d)
	default:
		err = msg.NakWithDelay(d.Delay)
	}
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "natsconsumer: settle failed; the message will be redelivered",
			"action", d.Action.String(), "subject", m.Subject, "err", err)
	}
}

func (c *Consumer) deadLetter(ctx context.Context, msg jetstream.Msg, m *consumer.Message, d consumer.Decision) error {
	if c.cfg.DeadLetterSubject == "" {
		return msg.Term()
	}
	dl := nats.NewMsg(c.cfg.DeadLetterSubject)
	for k, v := range msg.Headers() {
		dl.Header[k] = v
	}
	dl.Header.Set(HeaderReason, string(d.Reason))
	dl.Header.Set(HeaderScope, d.Scope)
	dl.Header.Set(HeaderSubject, m.Subject)
	if d.Err != nil {
		dl.Header.Set(HeaderError, d.Err.Error())
	}
	sum := sha256.Sum256(m.Body)
	dl.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s|%s|%s", m.ID, d.Reason, hex.EncodeToString(sum[:8])))
	dl.Data = m.Body
	if _, err := c.js.PublishMsg(ctx, dl); err != nil {
		// Not dead-lettered: ask for redelivery, which decides again.
		_ = msg.NakWithDelay(time.Second)
		return fmt.Errorf("natsconsumer: publish dead letter: %w", err)
	}
	// Plain Term: TermWithReason is silently ignored by servers before
	// 2.10.4, which would leave the message to be redelivered forever.
	return msg.Term()
}

// keepAlive sends InProgress every interval until stop is called.
func keepAlive(msg jetstream.Msg, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func toMessage(msg jetstream.Msg, source string) *consumer.Message {
	m := &consumer.Message{Source: source, Subject: msg.Subject(), Body: msg.Data(), Headers: map[string]string{}}
	for k, v := range msg.Headers() {
		if len(v) > 0 {
			m.Headers[k] = v[0]
		}
	}
	m.ID = msg.Headers().Get(jetstream.MsgIDHeader)
	if md, err := msg.Metadata(); err == nil {
		m.Delivery = int(md.NumDelivered)
	}
	return m
}

// Publish publishes body to subject with Nats-Msg-Id set to key, and
// returns once the stream has stored it (or recognised it as a duplicate
// within its window; PubAck.Duplicate says so).
func Publish(ctx context.Context, js jetstream.JetStream, subject string, key idem.Key, body []byte, header nats.Header) (*jetstream.PubAck, error) {
	if err := idem.ValidateKey(string(key)); err != nil {
		return nil, err
	}
	m := nats.NewMsg(subject)
	for k, v := range header {
		m.Header[k] = v
	}
	m.Header.Set(jetstream.MsgIDHeader, string(key))
	m.Data = body
	return js.PublishMsg(ctx, m)
}
