package idem

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// DefaultMaxIntent is [Config.MaxIntent] when it is zero: 16 KiB, room for
// an operation name, an origin, a body's bounded member digests
// ([DefaultMaxDigests]) and a few fields of an application's own.
const DefaultMaxIntent = 16 << 10

// Config configures an [Engine]. The zero value works; defaults are filled in
// by [New].
type Config struct {
	// TTL is how long succeeded and failed records replay, counted from the
	// moment the outcome was recorded. After it, the key is a new intent. It
	// is a correctness parameter: see Cover. Defaults to 24h.
	TTL time.Duration
	// Cover names the windows TTL must cover (the longest client retry
	// chain, a queue's dead-letter replay window, a provider's dispute
	// window). New refuses a TTL shorter than any of them, naming the window.
	// Defaults to none.
	Cover map[string]time.Duration
	// Lease is how long an attempt may hold in_progress without a heartbeat
	// before readers treat it as unknown. The engine heartbeats every third
	// of it while the effect runs. Defaults to 30s.
	Lease time.Duration
	// InFlight is the default policy for a duplicate that arrives while the
	// first attempt runs. Defaults to InFlightReject.
	InFlight InFlightPolicy
	// Wait bounds how long an InFlightWait duplicate waits. Defaults to 10s.
	Wait time.Duration
	// RetryAfter is the hint given with ErrInFlight and unknown outcomes.
	// Defaults to 1s.
	RetryAfter time.Duration
	// EffectTimeout bounds an effect (Policy.Timeout overrides it per
	// operation). The effect runs detached from the caller's cancellation
	// — once started, its outcome belongs to the intent, not to the
	// caller, so a caller that goes away never interrupts it — and this
	// timeout is what ends an effect that does not return: its outcome is
	// then unknown. Defaults to 60s.
	EffectTimeout time.Duration
	// FinishTimeout bounds the recording of an outcome (it runs under
	// context.WithoutCancel of the caller's context). A failed outcome
	// write is retried with capped exponential backoff for all of it;
	// past it the outcome goes to Spool, when one is set. Defaults to 10s.
	FinishTimeout time.Duration
	// StoreRetries is how many times a store call on the request path
	// (claim, read) that failed is retried, with the same attempt id so a
	// claim whose answer was lost is recognised. Outcome writes are
	// retried until FinishTimeout instead. Defaults to 2.
	StoreRetries int
	// Spool, when set, keeps outcomes the store could not take within
	// FinishTimeout (fsync'd to local files) and re-applies them, fenced,
	// every SpoolInterval until the store answers; see [Spool]. Without
	// it such an outcome is lost and its record becomes unknown after its
	// lease. Defaults to none.
	Spool *Spool
	// SpoolInterval is how often spooled outcomes are re-applied.
	// Defaults to 1s.
	SpoolInterval time.Duration
	// PollMin and PollMax bound the capped exponential backoff waiters use
	// when the store has no notifications. When it has (an [Notifier]),
	// a waiter reads the store once per notification and, as a fallback
	// for a notification the store failed to deliver, after PollMax, then
	// after doubling intervals up to 30s (or PollMax if longer): its reads
	// grow with the logarithm of its wait, not with the wait. A waiter
	// also reads at the holder's lease deadline. Default to 5ms and 500ms.
	PollMin, PollMax time.Duration
	// Clock returns the current time. When the store has a clock
	// ([StoreClock]), the engine adds its measured offset to the store's
	// clock to every reading it decides leases and expiry at, so engines
	// whose clocks disagree agree on time. Defaults to time.Now.
	Clock func() time.Time
	// ClockSync is how often the engine re-measures its offset to the
	// store's clock, on its own goroutine (stopped by Close); New measures
	// it first. A measurement that fails keeps the last offset. Negative:
	// never measure, decide on Clock alone (for tests that drive a fake
	// clock against a store that has its own). Defaults to 1m.
	ClockSync time.Duration
	// AllowVolatileStore lets New start on a store that can forget
	// recorded outcomes (see [DurabilityChecker]), or whose durability it
	// cannot check, instead of refusing with [ErrVolatileStore]. The
	// engine then logs each finding at error level and reports an
	// [EventVolatileStore]. Defaults to false.
	AllowVolatileStore bool
	// AllowAsyncReplication lets New start on a store whose replication
	// can lose an acknowledged claim in a failover (an asynchronous
	// standby or replica; see [ReplicationChecker]), or whose replication
	// it cannot check, instead of refusing with [ErrUnsafeReplication].
	// The engine then logs each finding at error level and reports an
	// [EventReplication] with Delta 0. Defaults to false.
	AllowAsyncReplication bool
	// ReplicationCheck is how often the engine reads the store's
	// replication again after New, on its own goroutine (stopped by
	// Close), for stores that implement [ReplicationChecker]: a setup
	// that turns unsafe while the engine runs (a failover manager that
	// empties synchronous_standby_names, a semi-synchronous primary that
	// fell back to asynchronous) is logged at error level and reported as
	// an [EventReplication] with Delta 0, and one that is safe again with
	// Delta 1. Claims already fail closed where the store waits for its
	// replicas; this keeps the gauge and the logs true. Negative: never.
	// Defaults to 1m.
	ReplicationCheck time.Duration
	// MaxIntent bounds the encoded intent journal written with a claim
	// (Request.Intent or LazyIntent, as JSON), in bytes: a request whose
	// intent is larger is refused with an [*IntentTooLargeError] before
	// anything is claimed, so no caller can make the store keep an
	// unbounded journal per key. Negative: no bound. Defaults to 16 KiB
	// ([DefaultMaxIntent]).
	MaxIntent int
	// Encryption, when set, encrypts recorded results and intent journals
	// at rest with AES-256-GCM under the keyring's current key, and
	// decrypts them with any key it holds (see [Keyring]). A record sealed
	// with a key the keyring does not hold is never served, treated as
	// absent or run again: the call fails with an error matching
	// [ErrUnknownKey]. Records written before encryption was turned on
	// stay readable. Defaults to none: values are stored as they are.
	Encryption *Keyring
	// Observer receives events for metrics and traces. Defaults to none.
	Observer Observer
	// Logger receives structured logs; keys are logged as hashes. Defaults
	// to discarding logs.
	Logger *slog.Logger
	// Codec encodes typed results for [Do]. Defaults to JSON.
	Codec Codec
	// ReplayCache keeps terminal records in memory so replays need no store
	// round trip. Defaults to on (32 MiB), trusting an entry for 1s on a
	// store other processes share; see [ReplayCacheConfig] for what bounds
	// its staleness.
	ReplayCache ReplayCacheConfig
}

func (c *Config) fill() error {
	if c.TTL == 0 {
		c.TTL = 24 * time.Hour
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.InFlight == InFlightDefault {
		c.InFlight = InFlightReject
	}
	if c.Wait == 0 {
		c.Wait = 10 * time.Second
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = time.Second
	}
	if c.EffectTimeout == 0 {
		c.EffectTimeout = time.Minute
	}
	if c.SpoolInterval == 0 {
		c.SpoolInterval = time.Second
	}
	if c.FinishTimeout == 0 {
		c.FinishTimeout = 10 * time.Second
	}
	if c.StoreRetries == 0 {
		c.StoreRetries = 2
	}
	if c.PollMin == 0 {
		c.PollMin = 5 * time.Millisecond
	}
	if c.PollMax == 0 {
		c.PollMax = 500 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.ReplicationCheck == 0 {
		c.ReplicationCheck = time.Minute
	}
	if c.ClockSync == 0 {
		c.ClockSync = time.Minute
	}
	if c.MaxIntent == 0 {
		c.MaxIntent = DefaultMaxIntent
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Codec == nil {
		c.Codec = JSONCodec
	}
	var errs []error
	for name, d := range map[string]time.Duration{
		"TTL": c.TTL, "Lease": c.Lease, "Wait": c.Wait, "RetryAfter": c.RetryAfter,
		"FinishTimeout": c.FinishTimeout, "EffectTimeout": c.EffectTimeout, "SpoolInterval": c.SpoolInterval, "PollMin": c.PollMin, "PollMax": c.PollMax,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("idem: Config.%s must not be negative, got %s", name, d))
		}
	}
	if c.StoreRetries < 0 {
		errs = append(errs, fmt.Errorf("idem: Config.StoreRetries must not be negative, got %d", c.StoreRetries))
	}
	if c.InFlight != InFlightReject && c.InFlight != InFlightWait {
		errs = append(errs, fmt.Errorf("idem: Config.InFlight: unknown policy %d", c.InFlight))
	}
	if c.PollMax < c.PollMin {
		errs = append(errs, fmt.Errorf("idem: Config.PollMax (%s) is below PollMin (%s)", c.PollMax, c.PollMin))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ValidateRetention(c.TTL, c.Cover)
}
