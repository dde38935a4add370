package idemhttp

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/idemkit/idem"
)

// Requirement declares whether a route takes an Idempotency-Key.
type Requirement int

const (
	// Exempt routes pass through untouched: no key is read, nothing is
	// claimed. Use it for operations that are naturally idempotent.
	Exempt Requirement = iota
	// Optional routes are protected when the request carries a key and
	// pass through without one.
	Optional
	// Required routes refuse a request without a key (400, key-missing).
	Required
)

func (q Requirement) String() string {
	switch q {
	case Exempt:
		return "exempt"
	case Optional:
		return "optional"
	case Required:
		return "required"
	}
	return fmt.Sprintf("Requirement(%d)", int(q))
}

// Rule declares the requirement of the requests it matches. Rules are tried
// in order; the first match decides, and a request no rule matches is
// exempt. GET, HEAD, OPTIONS and TRACE requests are always exempt: they are
// safe by definition.
type Rule struct {
	// Methods the rule matches, e.g. "POST". Empty matches every method.
	Methods []string
	// Pattern the URL path must match. Empty matches every path; a pattern
	// ending in "/" matches that subtree ("/v1/" matches "/v1/charges");
	// anything else is matched with path.Match, where '*' stands for one
	// path segment ("/orders/*/refunds").
	Pattern string
	// Requirement is what a matching request must carry.
	Requirement Requirement
	// Operation names the operation in metrics and logs. Defaults to the
	// method and the pattern, e.g. "POST /orders/*".
	Operation string
	// Policy overrides the engine's in-flight policy, wait bound, lease and
	// timeout for matching requests. Defaults to the engine's.
	Policy idem.Policy
}

// DefaultRules protect POST and PATCH requests that carry a key and let
// everything else through.
var DefaultRules = []Rule{{Methods: []string{http.MethodPost, http.MethodPatch}, Requirement: Optional}}

func (ru *Rule) validate(i int) error {
	if ru.Requirement < Exempt || ru.Requirement > Required {
		return fmt.Errorf("idemhttp: Config.Rules[%d]: unknown requirement %d", i, ru.Requirement)
	}
	if ru.Pattern != "" && !strings.HasSuffix(ru.Pattern, "/") {
		if _, err := path.Match(ru.Pattern, ""); err != nil {
			return fmt.Errorf("idemhttp: Config.Rules[%d]: pattern %q: %w", i, ru.Pattern, err)
		}
	}
	return nil
}

// matches reports whether r, whose method is method, matches the rule.
func (ru *Rule) matches(method string, r *http.Request) bool {
	if len(ru.Methods) > 0 {
		ok := false
		for _, m := range ru.Methods {
			if strings.EqualFold(m, method) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return idem.MatchPattern(ru.Pattern, r.URL.Path)
}

func (ru *Rule) operation(method string) string {
	if ru.Operation != "" {
		return ru.Operation
	}
	if ru.Pattern == "" {
		return method
	}
	return method + " " + ru.Pattern
}

func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// DefaultRoute is the route part of the fingerprint: the URL path and, when
// present, the query with its parameters sorted. Two requests to different
// resources with the same key are a mismatch, not a replay.
func DefaultRoute(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return r.URL.Path
	}
	return r.URL.Path + "?" + r.URL.Query().Encode()
}
