package reconcile

import (
	"sort"
	"time"
)

// Class is what reconciliation concluded about one key.
type Class string

// Reconciliation classes. Names are stable: reports, metrics and the CLI use
// them.
const (
	// ClassReconciled: local and provider agree; the record is marked.
	ClassReconciled Class = "reconciled"
	// ClassUnderCounted: the provider applied a key that was unknown or
	// absent locally; it has been recorded as succeeded.
	ClassUnderCounted Class = "under_counted"
	// ClassOverCounted: recorded succeeded locally, but the provider has
	// nothing (or declined it) after the settlement window; marked for
	// investigation, state kept.
	ClassOverCounted Class = "over_counted"
	// ClassDrift: both sides have the key but amounts, currency or outcome
	// differ; marked, state kept.
	ClassDrift Class = "drift"
	// ClassDuplicate: the provider lists the key more than once — a
	// possible double application at the provider (two charges, two
	// refunds under one intent). The local record is decided as usual
	// (an unknown one the provider applied is recorded succeeded) and
	// marked drift, so it is reported on every run until a person
	// resolves it.
	ClassDuplicate Class = "duplicate"
	// ClassNotApplied: an unknown record the provider never applied, past
	// the settlement window; failed or released per configuration.
	ClassNotApplied Class = "not_applied"
	// ClassPending: not decidable yet (in progress, inside the settlement
	// window, or the provider could not tell).
	ClassPending Class = "pending"
	// ClassSkipped: already reconciled by an earlier run, or not an intent
	// that goes to a provider.
	ClassSkipped Class = "skipped"
)

// Classes lists the classes in report order.
var Classes = []Class{ClassReconciled, ClassUnderCounted, ClassOverCounted, ClassDrift, ClassDuplicate, ClassNotApplied, ClassPending, ClassSkipped}

// Finding is the conclusion about one key.
type Finding struct {
	Class Class `json:"class"`
	// Scope and Key identify the local record (for a provider entry with no
	// local record, the record reconciliation created).
	Scope string `json:"scope"`
	Key   string `json:"key"`
	// ForwardKey is the key the provider knows.
	ForwardKey string `json:"forward_key"`
	// Local and Provider are the amounts each side counted, in minor units
	// of LocalCurrency and ProviderCurrency: Local is the intent's amount
	// for a succeeded or unknown record (what it meant to move), 0 for a
	// failed one; Provider sums what the provider applied under the key
	// (every entry of a duplicate), 0 when it moved nothing.
	Local            int64  `json:"local_amount"`
	LocalCurrency    string `json:"local_currency,omitempty"`
	Provider         int64  `json:"provider_amount"`
	ProviderCurrency string `json:"provider_currency,omitempty"`
	// Detail says why, in a few words.
	Detail string `json:"detail,omitempty"`
	// Kept is set when the provider could not be asked about a key this
	// run and the class is the one an earlier run stored on the record
	// (drift or over_counted): a provider outage never clears a finding.
	// Provider is then 0 and the finding adds nothing to DriftAmount.
	Kept bool `json:"kept,omitempty"`
	// Age is how long the record has existed (since its claim).
	Age time.Duration `json:"-"`
}

// Report is the result of one reconciliation run.
type Report struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Checked is how many local records were read.
	Checked int `json:"checked"`
	// Counts is the number of keys per class.
	Counts map[Class]int `json:"counts"`
	// Keys lists the keys per class (skipped keys are not listed).
	Keys map[Class][]string `json:"keys"`
	// Findings holds every non-skipped finding.
	Findings []Finding `json:"findings"`
	// DriftCount is the number of drift findings.
	DriftCount int `json:"drift_count"`
	// DriftAmount sums, per currency, the absolute differences of drift
	// findings, in minor units.
	DriftAmount map[string]int64 `json:"drift_amount"`
	// OldestUnreconciled is the age of the oldest record left not
	// reconciled (pending, over-counted, drift); zero when there is none.
	OldestUnreconciled time.Duration `json:"-"`
	// OldestUnreconciledSeconds is OldestUnreconciled in seconds, for JSON.
	OldestUnreconciledSeconds float64 `json:"oldest_unreconciled_age_seconds"`
	// ProviderListed is false when the provider could not list its entries,
	// so provider entries with no local record were not looked for.
	ProviderListed bool `json:"provider_listed"`
	// ProviderSince is the oldest application time of the provider entries
	// looked at for a missing local record (StartedAt − Config.Lookback).
	// Older entries are not compared: their local records may have been
	// swept. Zero when the provider was not listed.
	ProviderSince time.Time `json:"provider_since,omitzero"`
	// Error is why the run stopped before it was complete (the store or
	// the provider's listing failed), as RunOnce returned it; empty for a
	// complete run. A report with an Error is never a clean bill.
	Error string `json:"error,omitempty"`
	// SkippedRows lists, by reason, the provider's rows left out of the
	// comparison: a settlement file's fees, payouts, adjustments and rows
	// with no key (see [RowSkipper]), rows whose key idem cannot
	// attribute, entries older than the look-back with no local record,
	// declined entries with no local record. Groups marked Unchecked may
	// hide a duplicate: the report is then not clean.
	SkippedRows []SkippedRows `json:"skipped_rows,omitempty"`
	// Errors holds per-key failures (the provider could not tell, a write
	// failed); those keys are also counted pending.
	Errors []string `json:"errors,omitempty"`
}

func newReport(now time.Time) *Report {
	return &Report{StartedAt: now, Counts: map[Class]int{}, Keys: map[Class][]string{}, DriftAmount: map[string]int64{}}
}

// Clean reports whether the run found nothing to investigate: no drift,
// no over-counted key, no key the provider lists twice. A clean report may
// still be incomplete (Error), leave keys undecided (Errors) or provider
// rows unchecked; see [Report.Complete].
func (r *Report) Clean() bool {
	return r.Counts[ClassDrift] == 0 && r.Counts[ClassOverCounted] == 0 && r.Counts[ClassDuplicate] == 0
}

// Complete reports whether the run reached every record, decided every key
// it could and checked every provider row that could settle an intent: no
// Error, no per-key Errors, no unchecked skipped rows.
func (r *Report) Complete() bool {
	return r.Error == "" && len(r.Errors) == 0 && r.Unchecked() == 0
}

// Unchecked is the number of provider rows left out that may settle an
// intent idem made (see [SkippedRows].Unchecked).
func (r *Report) Unchecked() int {
	n := 0
	for _, g := range r.SkippedRows {
		if g.Unchecked {
			n += g.Rows
		}
	}
	return n
}

// skip counts one provider row left out of the comparison.
func (r *Report) skip(reason string, unchecked bool, line int) {
	for i := range r.SkippedRows {
		if g := &r.SkippedRows[i]; g.Reason == reason {
			g.Rows++
			if line > 0 && len(g.Lines) < MaxSkippedLines {
				g.Lines = append(g.Lines, line)
			}
			return
		}
	}
	g := SkippedRows{Reason: reason, Rows: 1, Unchecked: unchecked}
	if line > 0 {
		g.Lines = []int{line}
	}
	r.SkippedRows = append(r.SkippedRows, g)
}

func (r *Report) add(f Finding) {
	r.Counts[f.Class]++
	if f.Class == ClassSkipped {
		return
	}
	r.Keys[f.Class] = append(r.Keys[f.Class], f.Key)
	r.Findings = append(r.Findings, f)
	switch f.Class {
	case ClassDrift:
		r.DriftCount++
		if !f.Kept {
			r.addDrift(f)
		}
	case ClassPending, ClassOverCounted, ClassDuplicate:
	default:
		return
	}
	if f.Age > r.OldestUnreconciled {
		r.OldestUnreconciled = f.Age
	}
}

func (r *Report) addDrift(f Finding) {
	if f.LocalCurrency == f.ProviderCurrency || f.LocalCurrency == "" || f.ProviderCurrency == "" {
		cur := f.ProviderCurrency
		if cur == "" {
			cur = f.LocalCurrency
		}
		r.DriftAmount[cur] += abs(f.Provider - f.Local)
		return
	}
	r.DriftAmount[f.LocalCurrency] += abs(f.Local)
	r.DriftAmount[f.ProviderCurrency] += abs(f.Provider)
}

func (r *Report) finish(now time.Time) {
	r.FinishedAt = now
	r.OldestUnreconciledSeconds = r.OldestUnreconciled.Seconds()
	for _, keys := range r.Keys {
		sort.Strings(keys)
	}
	sort.SliceStable(r.SkippedRows, func(i, j int) bool { return r.SkippedRows[i].Reason < r.SkippedRows[j].Reason })
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
