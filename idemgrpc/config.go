package idemgrpc

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

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
		if n == "" || strings.HasPrefix(n, ":") || strings.HasPrefix(n, "grpc-") || n == ReplayedTrailer {
			errs = append(errs, fmt.Errorf("idemgrpc: Config.RecordMetadata[%d]: %q cannot be recorded", i, name))
		}
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
