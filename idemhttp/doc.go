// Package idemhttp makes HTTP APIs idempotent with the Idempotency-Key
// header (IETF draft "The Idempotency-Key HTTP Header Field"), on the
// server and on the client.
//
// # Server
//
// [New] returns a net/http middleware. For each request a [Rule] selects
// (by default POST and PATCH carrying a key), it reads the body once
// (bounded: 413 before anything is claimed), fingerprints method, route and
// canonical body, and runs the handler through an [idem.Engine]:
//
//   - first request: the handler runs and its response is recorded —
//     status, an allow-list of headers ([DefaultRecordHeaders]; never
//     Set-Cookie, Authorization or hop-by-hop headers) and the body, or a
//     "too large" mark above Config.MaxResponse — before it is written to
//     the client (a flush reaches the client only once the body is past
//     MaxResponse). A client that leaves or stops reading changes nothing
//     about the outcome; it is reported as [idem.EventClientGone];
//   - duplicate: the recorded response, with Idempotent-Replayed: true;
//   - same key, other request: 422 (400 idempotency_error under
//     [CompatStripe]), naming the top-level JSON members or form fields
//     that differ (from digests keyed per scope; none in the global
//     scope), never their values. JSON and form bodies are compared by
//     their canonical forms ([idem.CanonicalJSON], [idem.CanonicalForm]);
//     other bodies byte for byte;
//   - duplicate while the first runs: 409 with Retry-After, or a wait then
//     a replay (idem.InFlightWait);
//   - outcome unknown (lease expired, crash, [MarkUnknown], panic): 409
//     with its own problem type, never a re-run;
//   - store unavailable: 503; the handler does not run unprotected;
//   - client gone before the claim: 499 ([StatusClientClosedRequest]),
//     nothing claimed;
//   - a request asking to switch protocols (Upgrade): 400, nothing claimed.
//
// Every error is application/problem+json (RFC 9457) with a stable type
// URI (the Type constants), documented in docs/http.md, and an "error"
// member that Stripe-style SDKs raise. Config.Compat = [CompatStripe]
// answers as Stripe's API does for clients built on its SDKs.
//
// Keys are scoped: Config.Scope returns the authenticated principal, so one
// principal is never served another's response. [TrustedHeaderScope] takes
// the principal a gateway names in a header, [BearerScope] the claims of a
// bearer token a [TokenVerifier] checked; a request without a principal is
// refused with 401 before anything is claimed. A server that wants one
// global namespace passes [GlobalScope] explicitly.
//
// Inside a handler, [ReleaseKey] says nothing happened (the key is freed
// and the response is not recorded) and [MarkUnknown] says the effect may
// have happened. A panic marks the record unknown and then propagates, or
// answers 500 with Config.RecoverPanics.
//
// # Client
//
// [Transport] attaches the key carried by the request context ([WithKey])
// to every request, and [Retrier] retries only what is safe to retry:
// methods idempotent by definition, or requests that carry a key. It
// refuses a POST or PATCH without a key before sending it.
//
// # Recorded responses
//
// A record's Result holds a [RecordedResponse] in a compact binary format
// (version 2; the JSON records of version 1 still replay); the format
// is documented in docs/http.md so that operators (idem resolve) can write
// one by hand.
package idemhttp
