package idemlambda

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemkit/idem"
)

// DefaultDeadlineMargin is Config.DeadlineMargin's default.
const DefaultDeadlineMargin = time.Second

// Config configures the wrappers of [NewHTTP] and [NewSQS].
type Config struct {
	// Engine runs the intents. Build it once per container (at init), so
	// that warm invocations share it and its replay cache: by default a
	// warm container answers from memory the replays of a record it has
	// read within ReplayCache.MaxAge (1s over a shared store such as
	// DynamoDB); with ReplayCache.CacheRecorded it also keeps the outcomes
	// it recorded, so even the first retry that reaches it needs no read,
	// as Powertools' use_local_cache does. Required.
	Engine *idem.Engine

	// KeyHeader is the request header holding the key (HTTP events).
	// Defaults to "Idempotency-Key"; the value is a structured-field
	// string ("abc") or a bare token, as idemhttp reads it.
	KeyHeader string

	// KeyPointer, when set, reads the key from the event instead, at a
	// JSON pointer ("/body/order_id", "/requestContext/requestId"; see
	// [Pointer]): Powertools' event_key_jmespath. For SQS it points into
	// the record ("/body/transfer_id"; defaults to the message id). The
	// value must be a string or a number.
	KeyPointer string

	// Optional lets an HTTP request without a key run without
	// protection (as a route declared Optional in idemhttp). Defaults to
	// false: a request without a key gets 400 key-missing
	// (Powertools' raise_on_no_idempotency_key).
	Optional bool

	// FingerprintPointers, when set, are the parts of the event whose
	// values make the request's fingerprint: a retry that differs only
	// elsewhere (a timestamp, a trace header) is the same request; one
	// that differs here is a mismatch (422), never replayed another's
	// outcome. Powertools' payload_validation_jmespath. A pointer that
	// finds nothing counts as null. Defaults to none: HTTP events are
	// fingerprinted by method, route and body (JSON canonicalised), SQS
	// records by body.
	FingerprintPointers []string

	// Scope returns the scope of an HTTP request's key. Defaults to
	// [PrincipalScope]: the principal the API Gateway authorizer (JWT
	// sub, IAM user ARN, Lambda authorizer principalId) or the Function
	// URL's IAM auth established; a request without one gets 401. Use
	// [GlobalScope] for one namespace of keys, explicitly. SQS records are
	// scoped by their queue's ARN.
	Scope ScopeFunc

	// Operation names the operation in metrics and logs. Defaults to
	// "lambda" (HTTP) or "sqs".
	Operation string

	// Policy is passed to the engine; its Timeout is shortened to what
	// the invocation's deadline leaves (see DeadlineMargin).
	Policy idem.Policy

	// DeadlineMargin is kept between the effect's bound and the Lambda
	// deadline (the context's deadline, the function's remaining time),
	// for recording the outcome. An effect still running at its bound
	// ends unknown — never released, never re-run by a retry (Powertools
	// python #8049). An invocation left with less than the margin claims
	// nothing: 503 (HTTP) or a batch item failure (SQS). Defaults to 1s.
	DeadlineMargin time.Duration

	// ReleaseStatuses are the HTTP statuses by which a handler says that
	// nothing was applied: the claim is released, not recorded, and a
	// retry runs again. Defaults to 429 only (a 503 can come after the
	// effect).
	ReleaseStatuses []int
}

// pointers are Config's KeyPointer and FingerprintPointers, parsed.
type pointers struct {
	keyPtr *Pointer
	fpPtrs []Pointer
}

// fill validates c, fills in its defaults and returns its pointers parsed.
func (c *Config) fill(op string) (ptrs pointers, err error) {
	if c.Engine == nil {
		return ptrs, errors.New("idemlambda: Config.Engine is required")
	}
	if c.KeyHeader == "" {
		c.KeyHeader = "Idempotency-Key"
	}
	if c.KeyPointer != "" {
		p, err := ParsePointer(c.KeyPointer)
		if err != nil {
			return ptrs, fmt.Errorf("idemlambda: Config.KeyPointer: %w", err)
		}
		ptrs.keyPtr = &p
	}
	for i, s := range c.FingerprintPointers {
		p, err := ParsePointer(s)
		if err != nil {
			return ptrs, fmt.Errorf("idemlambda: Config.FingerprintPointers[%d]: %w", i, err)
		}
		ptrs.fpPtrs = append(ptrs.fpPtrs, p)
	}
	if c.Scope == nil {
		c.Scope = PrincipalScope
	}
	if c.Operation == "" {
		c.Operation = op
	}
	if c.DeadlineMargin < 0 {
		return ptrs, fmt.Errorf("idemlambda: Config.DeadlineMargin must not be negative, got %s", c.DeadlineMargin)
	}
	if c.DeadlineMargin == 0 {
		c.DeadlineMargin = DefaultDeadlineMargin
	}
	if c.ReleaseStatuses == nil {
		c.ReleaseStatuses = []int{429}
	}
	c.ReleaseStatuses = slices.Clone(c.ReleaseStatuses)
	return ptrs, nil
}
