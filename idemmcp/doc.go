// Package idemmcp gives MCP tools with side effects exactly-once effects:
// an agent that retries a tool call (after a timeout, a re-plan, a host
// restart) gets the recorded result instead of a second refund, email or
// booking.
//
// It wraps tool handlers of the official Go MCP SDK
// (github.com/modelcontextprotocol/go-sdk). Create a [Guard] over an
// mcp.Server and add tools through it ([AddTool], [Guard.AddTool]):
//
//   - A side-effecting tool (one whose annotations do not say readOnlyHint)
//     gets a required string parameter [KeyParam] ("idempotency_key") in its
//     input schema, described so that the model reuses the key when it
//     retries the same action and makes a new one for a new action. Its
//     annotations become readOnlyHint: false, idempotentHint: true.
//   - A read-only tool is registered unchanged.
//
// A call to a keyed tool runs through the [idem.Engine]: the key is the
// argument [KeyParam], or the string in the request's _meta under [MetaKey]
// when an agent runtime supplies one (the runtime's key wins: it is derived
// from the runtime's own tool-call id, see [CallKey], and does not depend on
// the model copying a key correctly). The scope is the session's
// authenticated principal (the OAuth token's user id) unless Config.Scope
// says otherwise; the fingerprint is the tool name and the canonical JSON
// arguments without the key.
//
// What the model sees:
//   - first call: the tool's result;
//   - a retry with the same key and arguments: the recorded result, with
//     _meta[MetaReplayed] = true; a recorded tool error replays as the same
//     tool error;
//   - a retry while the first call still runs: a tool error that says to
//     wait and retry with the same key;
//   - the same key with other arguments: a tool error that says the key was
//     already used for a different call and names the top-level arguments
//     that differ;
//   - no key: a tool error that names the parameter.
//
// Arguments that fail the tool's schema validation never reach the handler,
// so the claim is released and the key stays free: the model can correct
// its arguments and retry with the same key. A result that asks for more
// input (multi-round-trip) is likewise not recorded. A handler panic is
// recorded as an unknown outcome and re-raised, as the engine does.
//
// Departures and decisions: the record's intent journal (idem.Intent.Fields)
// holds the tool name and a short unsalted digest of each top-level
// argument, so that a mismatch can name the arguments that changed without
// keeping their values; keep the store as private as the arguments. A tool
// error result is recorded as a failed outcome whose message is the result's
// JSON, so that it replays exactly.
//
// A call whose outcome is unknown waits for a decision taken outside the
// call (reconciliation, a recovery hook, `idem resolve`): the record's
// intent names [Origin], and [EncodeDecision] writes the decision as a
// tool result (or tool error) that retries replay, marked with
// _meta[MetaDecision].
//
// Tools must be added through the Guard; a tool added to the mcp.Server
// directly is not keyed.
package idemmcp

// KeyParam is the input parameter that carries the idempotency key.
const KeyParam = "idempotency_key"

// MetaKey is the field of a tools/call request's _meta through which an
// agent runtime supplies the idempotency key. It takes precedence over the
// KeyParam argument.
const MetaKey = "io.github.idemkit/idempotency-key"

// MetaReplayed is set to true in the _meta of a result that was replayed
// from the record instead of running the tool.
const MetaReplayed = "io.github.idemkit/replayed"
