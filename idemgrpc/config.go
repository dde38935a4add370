package idemgrpc

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idemkit/idem"
	"google.golang.org/grpc/codes"
)

// DefaultMaxResponse bounds a recorded response by default.
const DefaultMaxResponse = 1 << 20

// Config configures [UnaryServerInterceptor].
type Config struct {
	// Scope derives the key's scope from the authenticated principal. It is
	// required: a server that wants one namespace for every caller passes
	// [GlobalScope] to say so. There is no default.
	Scope ScopeFunc
	// Rules declare which methods are Required, Optional or Exempt; the
	// first matching rule decides and unmatched methods are exempt.
	// Defaults to [DefaultRules] (every unary method optional).
	Rules []Rule
	// MaxResponse bounds the encoded response message (or error status)
	// kept in the record. A larger response is returned in full but
	// recorded as "too large" (never truncated), and replays answer
	// FailedPrecondition with reason RESPONSE_TOO_LARGE. Defaults to 1 MiB.
	MaxResponse int
	// ReleaseCodes are handler status codes that mean "not applied" (for
	// example ResourceExhausted from a handler that sheds load before doing
	// anything): the key is released instead of recorded, so a retry runs
	// again. OK cannot be listed. Defaults to none: every answer is
	// recorded.
	ReleaseCodes []codes.Code
	// RecordMetadata names response header and trailer metadata that the
	// handler sets (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer) to be
	// recorded and replayed with the answer. Names are case-insensitive;
	// reserved names (grpc-*, pseudo-headers, idempotent-replayed) are
	// refused. Defaults to none: a replay carries no metadata but the
	// idempotent-replayed trailer.
	RecordMetadata []string
	// DigestSecret keys the per-field digests of the request message a
	// record keeps, from which a KEY_MISMATCH names the fields that
	// differ: each scope's digests are keyed with a key derived from it
	// (HMAC-SHA256, see [idem.DigestKey]), so they cannot be compared
	// across scopes, nor a guessed value tested against them without the
	// secret. It must be at least [idem.MinDigestSecret] bytes; give every
	// server that shares a store the same one (and the same as idemhttp's
	// and idemmcp's, if they share it). In the global scope no digests are
	// kept and a mismatch names no fields. Defaults to 32 random bytes
	// drawn by [UnaryServerInterceptor]: a mismatch then names no fields
	// for a record another process (another replica, or this one before a
	// restart) made.
	DigestSecret []byte
	// Logger receives errors that cannot be reported to the client (an
	// outcome that could not be recorded after the handler answered).
	// Defaults to the engine's logger.
	Logger *slog.Logger
}

func (c *Config) fill(engineLogger *slog.Logger) error {
	var errs []error
	if c.Scope == nil {
		errs = append(errs, errors.New("idemgrpc: Config.Scope is nil: pass a ScopeFunc that returns the authenticated principal, or idemgrpc.GlobalScope to opt in to one namespace shared by every caller"))
	}
	if c.Rules == nil {
		c.Rules = DefaultRules
	}
	if err := validateRules("Config", c.Rules); err != nil {
		errs = append(errs, err)
	}
	switch {
	case c.MaxResponse < 0:
		errs = append(errs, fmt.Errorf("idemgrpc: Config.MaxResponse must not be negative, got %d", c.MaxResponse))
	case c.MaxResponse == 0:
		c.MaxResponse = DefaultMaxResponse
	}
	for _, code := range c.ReleaseCodes {
		if code == codes.OK || code > codes.Unauthenticated {
			errs = append(errs, fmt.Errorf("idemgrpc: Config.ReleaseCodes: %d is not an error code", code))
		}
	}
	for i, name := range c.RecordMetadata {
		n := strings.ToLower(name)
		if n == "" || strings.HasPrefix(n, ":") || strings.HasPrefix(n, "grpc-") || n == ReplayedTrailer || n == DecisionTrailer || n == DecisionBodyTrailer {
			errs = append(errs, fmt.Errorf("idemgrpc: Config.RecordMetadata[%d]: %q cannot be recorded", i, name))
		}
	}
	if n := len(c.DigestSecret); n > 0 && n < idem.MinDigestSecret {
		errs = append(errs, fmt.Errorf("idemgrpc: Config.DigestSecret: %w: %d bytes, want at least %d", idem.ErrDigestSecretTooShort, n, idem.MinDigestSecret))
	}
	if c.Logger == nil {
		c.Logger = engineLogger
	}
	return errors.Join(errs...)
}

// allowList is the set of RecordMetadata names, lower-case, or nil.
func (c *Config) allowList() map[string]bool {
	if len(c.RecordMetadata) == 0 {
		return nil
	}
	allow := make(map[string]bool, len(c.RecordMetadata))
	for _, n := range c.RecordMetadata {
		allow[strings.ToLower(n)] = true
	}
	return allow
}
