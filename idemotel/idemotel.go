// Package idemotel traces idem engine calls with OpenTelemetry.
//
// [New] returns an [idem.Observer]; pass it as idem.Config.Observer (with
// [idem.Observers] to combine it with metrics). Each engine call becomes one
// span, "idem.do", under the caller's span, from the call's start to its
// end, with these attributes:
//
//	idem.operation   the request's operation
//	idem.outcome     first, replay, conflict, mismatch, released, failed, unknown, fenced, error
//	idem.key_hash    16 hex digits of SHA-256(scope, 0x00, key): the hash the engine logs
//	idem.scope_hash  16 hex digits of SHA-256(scope)
//
// The raw key and scope are never recorded: keys often carry order ids or
// account numbers, and traces leave the service. Calls that end in a store
// failure, a fence loss or an unknown outcome set the span status to Error.
// With [Config.StoreSpans], each store operation is a span too
// ("idem.store.claim", …).
package idemotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// ScopeName is the instrumentation scope of the tracer.
const ScopeName = "github.com/idemkit/idem/idemotel"

// Config configures the tracing observer.
type Config struct {
	// TracerProvider creates the tracer. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// StoreSpans adds a span per store operation. Defaults to false.
	StoreSpans bool
	// Clock returns the current time; a span ends at the event's arrival
	// and starts Duration earlier. Defaults to time.Now.
	Clock func() time.Time
}

// Observer turns engine events into spans. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	cfg    Config
}

var _ idem.Observer = (*Observer)(nil)

// New returns a tracing observer.
func New(cfg Config) *Observer {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Observer{tracer: cfg.TracerProvider.Tracer(ScopeName), cfg: cfg}
}

// Observe implements [idem.Observer]. The engine reports a call when it
// ends, so the span is recorded with explicit start and end times.
func (o *Observer) Observe(ctx context.Context, ev idem.Event) {
	switch ev.Kind {
	case idem.EventOutcome:
		end := o.cfg.Clock()
		_, span := o.tracer.Start(ctx, "idem.do", trace.WithTimestamp(end.Add(-ev.Duration)),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				attribute.String("idem.operation", ev.Operation),
				attribute.String("idem.outcome", string(ev.Outcome)),
				attribute.String("idem.key_hash", KeyHash(ev.Scope, ev.Key)),
				attribute.String("idem.scope_hash", ScopeHash(ev.Scope)),
			))
		if isError(ev.Outcome) {
			span.SetStatus(codes.Error, string(ev.Outcome))
		}
		if ev.Err != nil && isError(ev.Outcome) {
			// The error text may quote the key (errors.go formats keys into
			// messages), so only its kind is recorded.
			span.SetAttributes(attribute.String("idem.error", errorKind(ev.Err)))
		}
		span.End(trace.WithTimestamp(end))
	case idem.EventStore:
		if !o.cfg.StoreSpans {
			return
		}
		end := o.cfg.Clock()
		_, span := o.tracer.Start(ctx, "idem.store."+ev.StoreOp, trace.WithTimestamp(end.Add(-ev.Duration)))
		if ev.Err != nil {
			span.SetAttributes(attribute.String("idem.error", errorKind(ev.Err)))
		}
		span.End(trace.WithTimestamp(end))
	}
}

func isError(o idem.Outcome) bool {
	return o == idem.OutcomeError || o == idem.OutcomeFenced || o == idem.OutcomeUnknown
}

// KeyHash is the hash under which a (scope, key) appears in traces: the
// first 8 bytes of SHA-256(scope, 0x00, key), in hex — the same value the
// engine logs as key_hash, so a trace and a log line can be matched.
func KeyHash(scope, key string) string {
	s := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(s[:8])
}

// ScopeHash is the hash under which a scope appears in traces.
func ScopeHash(scope string) string {
	s := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(s[:8])
}
