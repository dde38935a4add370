// Package stripetest runs Stripe's official SDKs — stripe-go from the Go
// module proxy and stripe-node from npm, both at pinned versions —
// through the built idem proxy in front of a Stripe-shaped upstream that
// counts its charges: a client-side timeout retried by the SDK itself, a
// concurrent duplicate, a key reused with other parameters, a replay, an
// unknown outcome and a validation failure fixed and retried. Each must
// end in the SDK's right result type, with one charge per intent.
//
// It is a module of its own so that the SDK is no dependency of idem's.
// It has no code but its tests.
package stripetest
