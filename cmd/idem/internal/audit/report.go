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
	// Passed is false when a check failed.
	Passed bool `json:"passed"`
}

// CheckResult is one line of the report card.
type CheckResult struct {
	// Name is the check's: replay, divergence, concurrency, in-flight,
	// missing-key, key-limits, scope, problem-format or retention.
	Name string `json:"name"`
	// Result is pass, fail or skip.
	Result string `json:"result"`
	// Detail says what was seen, why it failed, or why it was skipped.
	Detail string `json:"detail"`
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
	verdict := "all checks passed"
	if !r.Passed {
		verdict = "some checks failed"
	}
	fmt.Fprintf(w, "\n%s %s: %s; %d requests sent\n", r.Method, r.URL, verdict, r.Requests)
}
