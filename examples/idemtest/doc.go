// Package idemtestexample shows idemtest on one correct charge handler and
// on three broken ones, each a mistake seen in real idempotency code:
//
//   - [CheckThenAct] looks the key up, runs the effect, then records the
//     answer: concurrent duplicates all pass the lookup.
//   - [UUIDKey] runs the effect through idem but keys it by a uuid made per
//     request, so every retry is a new intent.
//   - [NoFingerprint] keys by the client's header but fingerprints nothing,
//     so a changed request replays the first one's answer.
//
// Its tests show idemtest passing the correct handler and failing each
// broken one with the message that names its mistake.
package idemtestexample
