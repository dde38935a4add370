// Package reconcile compares idem's local records with a provider's view of
// the same intents, by forwarded key, and decides what can be decided:
//
//   - provider applied, local none or unknown → record it (under-counted);
//   - local succeeded, provider none after the settlement window → flag
//     over-counted for investigation (the state is kept, a mark is stored);
//   - both agree → mark reconciled (stored, so the next run skips it);
//   - amounts or currency differ → drift, with the difference.
//
// A [Reconciler] does this in batches, once ([Reconciler.RunOnce]) or on an
// interval ([Reconciler.Start]/[Reconciler.Stop]); it is idempotent: a
// second run over the same data writes nothing. A [Recoverer] is the
// per-operation recovery hook: it asks the provider "did you apply key K?"
// for unknown records and resolves them. Providers plug in through the small
// [Provider] interface; packages csvprovider (settlement files) and
// httpprovider (a lookup URL per key) ship two. [WriteText], [WriteHTML]
// and [WriteCSV] render a [Report]; the `idem reconcile` command (cmd/idem)
// runs a Reconciler once and prints it.
//
// A record made by an adapter (its intent names an origin: idemhttp,
// idemgrpc, idemmcp) is decided in the form that adapter replays:
// [AppliedDecision] or [NotAppliedDecision], written by the encoder the
// adapter registered ([idem.EncodeDecision]). The program running the
// reconciler must import those adapters; a record whose origin has no
// encoder is left undecided, with an error for its key.
//
// Decisions this package makes where the design is silent:
//
//   - A record is matched to the provider by its forwarded key
//     ([idem.Intent.ForwardKey], else the record's key). Forwarded keys must
//     be unique across scopes; two local records sharing one are reported
//     as errors and left alone.
//   - Only records that carry an intent are reconciled (a record without one
//     never reached a provider through the intent journal); they count as
//     skipped.
//   - A provider entry with status "failed" means the provider saw the key
//     and declined it: nothing moved. A local failed record agrees with it
//     and with "no entry"; a local failed record whose key the provider
//     applied is drift (local counted nothing, the provider moved the
//     amount), because a decided record is only changed by an operator.
//   - An unknown record the provider applied is resolved succeeded with the
//     provider's result. One the provider never saw is left alone until the
//     settlement window has passed since its claim, then failed (the
//     default), released, or left, as configured.
//   - A provider entry with no local record is recorded as a succeeded
//     record under the entry's scope (or [Config.OrphanScope]) and its key,
//     with a zero fingerprint: a later client retry with that key cannot run
//     the effect again (it gets a mismatch or the replay), which is the
//     point.
//   - drift_amount sums the absolute differences per currency, so opposite
//     drifts never cancel out.
//   - A key the provider lists more than once is a finding of its own
//     ([ClassDuplicate]): a possible double application. The record is
//     decided as usual, then marked drift so it pages until resolved.
//   - Provider rows left out of the comparison are listed by reason
//     ([SkippedRows]); those that may settle an intent idem made (older
//     than the look-back with no local record, a key idem cannot
//     attribute) are unchecked, and a report with unchecked rows is
//     never clean ([Report.Complete]).
//   - An unknown record's settlement window counts from the end of its
//     lease, not from when it was turned unknown.
//   - Reports print money ([money.Display]) and escape what came from
//     outside: control characters everywhere, formula cells in CSV.
package reconcile
