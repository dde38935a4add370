// Package idemgrpc makes unary gRPC calls idempotent, on the server and on
// the client, with an [idem.Engine].
//
// # Server
//
// [UnaryServerInterceptor] protects the unary methods a [Rule] selects (by
// default every unary method whose call carries a key). The key comes from
// the idempotency-key metadata, read as the HTTP Idempotency-Key header
// is: a structured-field string ("abc") or a bare token, 1 to 255 bytes of
// printable ASCII. The scope comes from Config.Scope, which is required
// ([TLSPeerScope], [AuthInfoScope], [MetadataScope], or [GlobalScope] to
// opt in to one namespace). The fingerprint is the full method name and
// the request's deterministic protobuf encoding (see [Fingerprint] for why
// not protojson). Then:
//
//   - first call: the handler runs and its answer is recorded — the
//     response message, or the error's status (code, message and details:
//     a handler error is an answer, recorded and replayed like a
//     response);
//   - duplicate: the recorded answer, with the trailer
//     idempotent-replayed: true;
//   - same key, other request: FailedPrecondition, with an ErrorInfo
//     (reason KEY_MISMATCH) naming the top-level request fields that
//     differ, never their values;
//   - duplicate while the first runs: Aborted with a RetryInfo detail
//     (IN_FLIGHT), or, with the idem.InFlightWait policy, a bounded wait
//     and then the replay;
//   - outcome unknown (lease expired after a crash, effect timeout, a
//     handler answering DeadlineExceeded or Canceled, an error marked
//     [idem.Unknown]): Aborted with reason OUTCOME_UNKNOWN, never a
//     re-run;
//   - store unavailable: Unavailable (STORE_UNAVAILABLE); the handler does
//     not run unprotected.
//
// Every refusal carries an errdetails.ErrorInfo in [ErrorDomain] with one
// of the Reason constants; [Reason] reads it back. A handler says nothing
// happened by returning an error wrapped with [idem.Release] (or with a
// code in Config.ReleaseCodes): the key is released and a retry runs
// again. [AttemptFrom] gives it the attempt, and the key to forward to a
// provider.
//
// The handler runs under the context the engine gives the effect, which
// keeps the call's values (metadata, peer) and ends at the effect's
// timeout (idem.Policy.Timeout); where the engine detaches effects from
// the caller's cancellation, a caller that goes away does not interrupt
// the handler, and its answer is still recorded for the retry. An error
// answered after that context ended is recorded as unknown, whatever its
// code.
//
// Headers and trailers the handler sets are recorded and replayed when
// Config.RecordMetadata names them; others go to the first caller only.
//
// Streaming methods are not covered: there is no stream interceptor, and
// streaming calls pass through untouched whatever metadata they carry.
//
// # Client
//
// [UnaryClientInterceptor] sends the key of the call's context ([WithKey])
// as idempotency-key metadata on every attempt of the call: it sets the
// metadata once, before grpc-go's retry loop (the service config's
// retryPolicy), which resends it with each attempt. It refuses, before
// sending, a call without a key to a method ClientConfig.Rules declare
// Required; list there every non-idempotent method the retryPolicy
// retries.
//
// # Records
//
// A record's Result holds the answer in a small versioned format (a
// version byte, then protobuf wire-format fields; see record.go) and its
// intent holds the full method name and per-field digests of the
// request, so that a mismatch can name the fields that differ.
//
// # Decisions
//
// A call whose outcome is unknown waits for a decision taken outside the
// call: reconciliation, a recovery hook, or an operator (`idem resolve`,
// `idem ui`). The record's intent names [Origin], and [EncodeDecision]
// (registered for it with idem.RegisterDecisionEncoder) writes the
// decision as an answer this package replays: a success as the method's
// response (decoded from the decision's body when it is protojson of that
// response, else an empty one), a failure as FailedPrecondition with
// reason DECIDED_FAILED; both with the trailer [DecisionTrailer], and the
// decision's body in [DecisionBodyTrailer].
//
// # Test service
//
// The tests and examples use the service in internal/testpb, generated
// from payments.proto with protoc and the pinned plugins; go generate
// ./internal/testpb regenerates it (internal/testpb/gen.go says what it
// needs).
package idemgrpc
