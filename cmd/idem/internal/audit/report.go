package audit

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is the audit's report card; idem audit --json prints it.
type Report struct {
	// URL and Method are the audited request's.
	URL    string `json:"url"`
	Method string `json:"method"`
	// Checks holds one result per check, in the order they ran.
	Checks []CheckResult `json:"checks"`
	// Requests is how many requests the audit sent.
	Requests int64 `json:"requests"`
	// Passed is false when a check failed. An inconclusive check does not
	// fail the audit, and is no pass either: see Inconclusive.
	Passed bool `json:"passed"`
	// EffectsSource is where the effect counts came from: "effects-url",
	// "fixture" (the auditor's own upstream), or "none" (effects were
	// not counted).
	EffectsSource string `json:"effects_source"`
	// Inconclusive is how many checks could not be decided: their answers
	// were right, but only an effect count can show that a repeated answer
	// did not come with a repeated effect.
	Inconclusive int `json:"inconclusive"`
}

// EffectCount is what a check's requests did to the effect count.
type EffectCount struct {
	// Made is how much the count grew over the check's requests.
	Made int64 `json:"made"`
	// Want is how much it may grow: one per intent that succeeded, none
	// for a refused request.
	Want int64 `json:"want"`
}

// CheckResult is one line of the report card.
type CheckResult struct {
	// Name is the check's: replay, divergence, concurrency, in-flight,
	// missing-key, key-limits, scope, problem-format or retention.
	Name string `json:"name"`
	// Result is pass, fail, inconclusive (the answers were right, but
	// deciding needs an effect count the audit did not have) or skip.
	Result string `json:"result"`
	// Detail says what was seen, why it failed, why it is inconclusive,
	// or why it was skipped.
	Detail string `json:"detail"`
	// Effects is what the check's requests did to the effect count; nil
	// when effects were not counted, or the check sends nothing.
	Effects *EffectCount `json:"effects,omitempty"`
}

// WriteText writes the report card as a table (what idem audit prints):
// one line per check with its result and detail, then the verdict.
func (r *Report) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "CHECK\tRESULT\tDETAIL\n")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Result, c.Detail)
	}
	_ = tw.Flush()
	switch r.EffectsSource {
	case "none", "":
		fmt.Fprintf(w, "\neffects: not counted (pass --effects-url, or --fixture behind a proxy or gateway): a repeated answer does not show that the effect did not run again\n")
	default:
		fmt.Fprintf(w, "\neffects: counted (%s)\n", r.EffectsSource)
	}
	verdict := "all checks passed"
	switch {
	case !r.Passed:
		verdict = "some checks failed"
	case r.Inconclusive > 0:
		verdict = fmt.Sprintf("no check failed, %d inconclusive", r.Inconclusive)
	}
	fmt.Fprintf(w, "%s %s: %s; %d requests sent\n", r.Method, r.URL, verdict, r.Requests)
}
