package reconcile

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes rep as a table for a terminal (what `idem reconcile`
// prints): the number of records checked, counts per class, the drift
// totals, how far back the provider was listed, the provider rows skipped
// by reason, one line per key that is not plainly reconciled, the per-key
// errors, and a last line "result: …" that says "clean" only for a
// complete run that found nothing.
func WriteText(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "idem reconcile: %d records checked in %s\n\n", rep.Checked, rep.FinishedAt.Sub(rep.StartedAt).Round(time.Millisecond))
	fmt.Fprintln(tw, "CLASS\tKEYS\t")
	for _, c := range Classes {
		fmt.Fprintf(tw, "%s\t%d\t\n", c, rep.Counts[c])
	}
	fmt.Fprintf(tw, "\ndrift_count\t%d\t\n", rep.DriftCount)
	fmt.Fprintf(tw, "drift_amount\t%s\t\n", amounts(rep.DriftAmount))
	fmt.Fprintf(tw, "oldest_unreconciled_age\t%s\t\n", rep.OldestUnreconciled.Round(time.Second))
	switch {
	case rep.ProviderListed:
		fmt.Fprintf(tw, "\nprovider entries applied since %s were checked for a local record (older ones are past the look-back)\n",
			rep.ProviderSince.UTC().Format(time.RFC3339))
	case rep.Error == "":
		fmt.Fprintln(tw, "\nnote: the provider cannot list its entries; keys with no local record were not looked for")
	}
	if len(rep.SkippedRows) > 0 {
		fmt.Fprintln(tw, "\nSKIPPED PROVIDER ROWS\tROWS\t")
		for _, reason := range sortedKeys(rep.SkippedRows) {
			fmt.Fprintf(tw, "%s\t%d\t\n", reason, rep.SkippedRows[reason])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var rows []Finding
	for _, f := range rep.Findings {
		if f.Class != ClassReconciled {
			rows = append(rows, f)
		}
	}
	if len(rows) > 0 {
		fmt.Fprintln(tw, "\nCLASS\tSCOPE\tKEY\tFORWARD KEY\tLOCAL\tPROVIDER\tDETAIL")
		for _, f := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Class, orDash(f.Scope), f.Key, f.ForwardKey,
				money(f.Local, f.LocalCurrency), money(f.Provider, f.ProviderCurrency), f.Detail)
		}
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(tw, "error: %s\n", e)
	}
	fmt.Fprintf(tw, "\nresult: %s\n", verdict(rep))
	return tw.Flush()
}

// verdict is the report's last line: what was found, and whether the run
// could look at everything. "clean" means complete and nothing found.
func verdict(rep *Report) string {
	var parts []string
	if !rep.Clean() {
		parts = append(parts, fmt.Sprintf("FOUND %d drift, %d over-counted", rep.Counts[ClassDrift], rep.Counts[ClassOverCounted]))
	}
	if rep.Error != "" {
		parts = append(parts, "INCOMPLETE: the run stopped: "+rep.Error)
	}
	if n := len(rep.Errors); n > 0 {
		parts = append(parts, fmt.Sprintf("UNDECIDED: %d keys could not be decided (errors above)", n))
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, "; ")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// amounts prints per-currency minor-unit totals, "EUR 150, USD 20".
func amounts(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	curs := sortedKeys(m)
	parts := make([]string, len(curs))
	for i, c := range curs {
		parts[i] = fmt.Sprintf("%s %d", c, m[c])
	}
	return strings.Join(parts, ", ")
}

func money(n int64, cur string) string {
	if cur == "" {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d %s", n, cur)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
