package idemgrpc

import (
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Requirement declares whether a method takes an idempotency key. It is
// idemhttp's: the same three answers for a method as for a route.
type Requirement = idemhttp.Requirement

const (
	// Exempt methods pass through untouched: no key is read, nothing is
	// claimed. Use it for methods that are naturally idempotent.
	Exempt = idemhttp.Exempt
	// Optional methods are protected when the call carries a key and pass
	// through without one.
	Optional = idemhttp.Optional
	// Required methods refuse a call without a key: the server answers
	// InvalidArgument (reason KEY_MISSING), and the client interceptor
	// refuses to send it.
	Required = idemhttp.Required
)

// Rule declares the requirement of the methods it matches. Rules are tried
// in order; the first match decides, and a method no rule matches is
// exempt. On the server, a method whose proto declares
// `option idempotency_level = NO_SIDE_EFFECTS;` is always exempt: it is
// safe by its own declaration.
type Rule struct {
	// Pattern is matched against the full method name,
	// "/package.Service/Method". Empty matches every method; a pattern
	// ending in "/" matches that service ("/idem.test.v1.Payments/");
	// anything else is matched with path.Match ("/*/Charge",
	// "/idem.test.v1.Payments/Charge").
	Pattern string
	// Requirement is what a matching call must carry.
	Requirement Requirement
	// Operation names the operation in metrics and logs (server only).
	// Defaults to the full method name.
	Operation string
	// Policy overrides the engine's in-flight policy, wait bound, lease and
	// timeout for matching calls (server only). Defaults to the engine's.
	Policy idem.Policy
}

// DefaultRules protect every unary method whose call carries a key and let
// calls without one through.
var DefaultRules = []Rule{{Requirement: Optional}}

func validateRules(who string, rules []Rule) error {
	for i := range rules {
		ru := &rules[i]
		if ru.Requirement < Exempt || ru.Requirement > Required {
			return fmt.Errorf("idemgrpc: %s.Rules[%d]: unknown requirement %d", who, i, ru.Requirement)
		}
		if ru.Pattern != "" && !strings.HasSuffix(ru.Pattern, "/") {
			if _, err := path.Match(ru.Pattern, ""); err != nil {
				return fmt.Errorf("idemgrpc: %s.Rules[%d]: pattern %q: %w", who, i, ru.Pattern, err)
			}
		}
	}
	return nil
}

func (ru *Rule) matches(fullMethod string) bool {
	return idem.MatchPattern(ru.Pattern, fullMethod)
}

func (ru *Rule) operation(fullMethod string) string {
	if ru.Operation != "" {
		return ru.Operation
	}
	return fullMethod
}

// firstMatch returns the first rule matching fullMethod, or nil.
func firstMatch(rules []Rule, fullMethod string) *Rule {
	for i := range rules {
		if rules[i].matches(fullMethod) {
			return &rules[i]
		}
	}
	return nil
}

// sideEffectFree caches, per full method name, whether its descriptor in
// the global registry declares idempotency_level = NO_SIDE_EFFECTS.
var sideEffectFree sync.Map // string → bool

// noSideEffects reports whether the method's proto declares it has no side
// effects. A method the registry does not know is assumed to have some.
func noSideEffects(fullMethod string) bool {
	if v, ok := sideEffectFree.Load(fullMethod); ok {
		return v.(bool)
	}
	v := idempotencyLevel(fullMethod) == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	sideEffectFree.Store(fullMethod, v)
	return v
}

// idempotencyLevel looks the method "/pkg.Service/Method" up in the
// global registry.
func idempotencyLevel(fullMethod string) descriptorpb.MethodOptions_IdempotencyLevel {
	name := strings.TrimPrefix(fullMethod, "/")
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name[:i] + "." + name[i+1:]))
	if err != nil {
		return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil {
		return descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
	}
	return opts.GetIdempotencyLevel()
}
