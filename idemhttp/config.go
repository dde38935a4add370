package idemhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idem"
)

// Default limits.
const (
	DefaultMaxBody      = 1 << 20
	DefaultMaxResponse  = 1 << 20
	DefaultWriteTimeout = 30 * time.Second
)

// Config configures a [Middleware].
type Config struct {
	// Scope derives the key's scope from the authenticated principal. It is
	// required: a server that wants one namespace for every caller passes
	// [GlobalScope] to say so. There is no default.
	Scope ScopeFunc
	// Rules declare which requests are Required, Optional or Exempt; the
	// first matching rule decides and unmatched requests are exempt.
	// Defaults to [DefaultRules] (POST and PATCH optional).
	Rules []Rule
	// MaxBody bounds the request body read to fingerprint it; a larger body
	// is refused with 413 before anything is claimed. Defaults to 1 MiB.
	MaxBody int64
	// MaxDigests bounds the members of a JSON object body (or the
	// top-level fields of a form body) that get a digest of their own in
	// the intent, so that a 422 can name the members a retry changed: the
	// first MaxDigests in canonical order
	// (sorted by name); the rest share one, named "…" in a 422 (see
	// [idem.BodyHasher]). A body of many tiny members thus stores a short
	// list. Negative: no member gets its own. Defaults to
	// [idem.DefaultMaxDigests] (64).
	MaxDigests int
	// MaxResponse bounds the response body kept in the record. A response
	// is held until its outcome is recorded and only then written to the
	// client; one that grows larger is sent from that point on as the
	// handler writes it, recorded as "too large" (never truncated), and
	// replays answer with a response-too-large problem. Defaults to 1 MiB.
	MaxResponse int64
	// WriteTimeout bounds how long the client may take to accept each
	// 64 KiB of a protected request's response (recorded or replayed): a
	// client that stops reading is given up on, without affecting the
	// outcome, which is recorded before the response is written. It is set
	// with http.ResponseController.SetWriteDeadline and replaces the
	// server's WriteTimeout for these responses. Negative: no limit.
	// Defaults to 30s.
	WriteTimeout time.Duration
	// RecordHeaders names response headers recorded and replayed in
	// addition to [DefaultRecordHeaders]. Set-Cookie, Authorization,
	// hop-by-hop headers, Content-Length and Date are refused. Defaults to
	// none.
	RecordHeaders []string
	// ReleaseStatuses are response statuses that mean "not applied" (for
	// example 429 and 503 from a service that sheds load before doing
	// anything): the key is released instead of recorded, so a retry runs
	// again. Defaults to none: every response is recorded; under
	// [CompatStripe], to [StripeReleaseStatuses]. An empty, non-nil list
	// is none under either profile.
	ReleaseStatuses []int
	// Compat is the client profile of the answers: [CompatIETF] (RFC 9457
	// problems, 422 for a reused key) or [CompatStripe] (Stripe's answers
	// and headers, for clients built on Stripe's SDKs). Defaults to
	// CompatIETF.
	Compat Compat
	// Route returns the route part of the fingerprint. Defaults to
	// [DefaultRoute] (the path and sorted query).
	Route func(r *http.Request) string
	// RecoverPanics makes a handler panic answer 500 (when nothing was
	// written yet) instead of propagating. Either way the record is marked
	// unknown first. http.ErrAbortHandler always propagates. Defaults to
	// false: the panic reaches the surrounding stack.
	RecoverPanics bool
	// Intent, when set, adds business fields to the intent journal
	// written with each claim, before the handler runs: the amount and
	// currency reconciliation compares with the provider's settlement,
	// the counterparty, the key forwarded to the provider, other Fields.
	// It gets the request and its body (read-only) and is called only when
	// a claim is written, never on a replay. Operation is the rule's and
	// Fields holds the body's digests; Origin is set by the middleware
	// after the hook. Defaults to none.
	Intent func(r *http.Request, body []byte, in *idem.Intent)
	// DigestSecret keys the per-field body digests a record keeps, from
	// which a 422 key-mismatch names the fields that differ: each scope's
	// digests are keyed with a key derived from it (HMAC-SHA256), so they
	// cannot be compared across scopes, nor a guessed value tested against
	// them without the secret. It must be at least [MinDigestSecret] bytes;
	// give every process that shares a store the same one. In the global
	// scope no digests are kept and a 422 names no fields. Defaults to 32
	// random bytes drawn by [New]: a 422 then names no fields for a record
	// another process (another replica, or this one before a restart)
	// made.
	DigestSecret []byte
	// ScopeQuota bounds, per scope and in this process, the requests
	// running their handler at once and the new keys started per minute;
	// see [ScopeQuota]. Defaults to no bounds.
	ScopeQuota ScopeQuota
	// Logger receives errors that cannot be reported to the client (an
	// outcome that could not be recorded after the response was sent).
	// Defaults to the engine's logger.
	Logger *slog.Logger
}

func (c *Config) fill(engineLogger *slog.Logger) error {
	var errs []error
	if c.Scope == nil {
		errs = append(errs, errors.New("idemhttp: Config.Scope is nil: pass a ScopeFunc that returns the authenticated principal, or idemhttp.GlobalScope to opt in to one namespace shared by every caller"))
	}
	if c.Rules == nil {
		c.Rules = DefaultRules
	}
	for i := range c.Rules {
		if err := c.Rules[i].validate(i); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case c.MaxBody < 0:
		errs = append(errs, fmt.Errorf("idemhttp: Config.MaxBody must not be negative, got %d", c.MaxBody))
	case c.MaxBody == 0:
		c.MaxBody = DefaultMaxBody
	}
	switch {
	case c.MaxResponse < 0:
		errs = append(errs, fmt.Errorf("idemhttp: Config.MaxResponse must not be negative, got %d", c.MaxResponse))
	case c.MaxResponse == 0:
		c.MaxResponse = DefaultMaxResponse
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	switch c.Compat {
	case CompatIETF:
	case CompatStripe:
		if c.ReleaseStatuses == nil {
			c.ReleaseStatuses = append([]int(nil), StripeReleaseStatuses...)
		}
	default:
		errs = append(errs, fmt.Errorf("idemhttp: Config.Compat: unknown profile %d", c.Compat))
	}
	for _, s := range c.ReleaseStatuses {
		if s < 100 || s > 999 {
			errs = append(errs, fmt.Errorf("idemhttp: Config.ReleaseStatuses: %d is not an HTTP status", s))
		}
	}
	if n := len(c.DigestSecret); n > 0 && n < MinDigestSecret {
		errs = append(errs, fmt.Errorf("idemhttp: Config.DigestSecret must be at least %d bytes, got %d", MinDigestSecret, n))
	}
	if c.Route == nil {
		c.Route = DefaultRoute
	}
	if err := c.ScopeQuota.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Logger == nil {
		c.Logger = engineLogger
	}
	return errors.Join(errs...)
}
