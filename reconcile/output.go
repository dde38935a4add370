package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/reconcile/money"
)

// WriteText writes rep as a table for a terminal (what `idem reconcile`
// prints): the number of records checked, counts per class, the drift
// totals, how far back the provider was listed, the provider rows skipped
// by reason, one line per key that is not plainly reconciled, the per-key
// errors, and a last line "result: …" that says "clean" only for a
// complete run that found nothing and left no provider row unchecked.
// Amounts are money ("12.50 EUR"); values from outside (keys, scopes,
// errors) are printed with their control characters escaped.
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
		fmt.Fprintln(tw, "\nSKIPPED PROVIDER ROWS\tROWS\tCHECKED\tLINES\t")
		for _, g := range rep.SkippedRows {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", printable(g.Reason), g.Rows, checked(g), lines(g))
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Class, printable(orDash(f.Scope)), printable(f.Key),
				printable(f.ForwardKey), amount(f.Local, f.LocalCurrency), amount(f.Provider, f.ProviderCurrency), printable(f.Detail))
		}
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(tw, "error: %s\n", printable(e))
	}
	fmt.Fprintf(tw, "\nresult: %s\n", printable(verdict(rep)))
	return tw.Flush()
}

// WriteJSON writes rep as indented JSON (what `idem reconcile --json`
// prints): amounts in minor units with their currencies, keys exact, and
// the runes a terminal could interpret escaped as \uXXXX.
func WriteJSON(w io.Writer, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}

// verdict is the report's last line: what was found, and whether the run
// could look at everything. "clean" means complete and nothing found.
func verdict(rep *Report) string {
	var parts []string
	if !rep.Clean() {
		found := fmt.Sprintf("FOUND %d drift, %d over-counted", rep.Counts[ClassDrift], rep.Counts[ClassOverCounted])
		if n := rep.Counts[ClassDuplicate]; n > 0 {
			found += fmt.Sprintf(", %d listed twice by the provider", n)
		}
		parts = append(parts, found)
	}
	if rep.Error != "" {
		parts = append(parts, "INCOMPLETE: the run stopped: "+rep.Error)
	}
	if n := len(rep.Errors); n > 0 {
		parts = append(parts, fmt.Sprintf("UNDECIDED: %d keys could not be decided (errors above)", n))
	}
	if n := rep.Unchecked(); n > 0 {
		parts = append(parts, fmt.Sprintf("UNCHECKED: %d provider rows that may settle an intent were not compared (skipped rows above)", n))
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, "; ")
}

// checked says whether a group of skipped rows may hide a duplicate.
func checked(g SkippedRows) string {
	if g.Unchecked {
		return "NO: may hide a duplicate"
	}
	return "not needed"
}

// lines lists a group's first lines, "12, 40, …".
func lines(g SkippedRows) string {
	if len(g.Lines) == 0 {
		return "-"
	}
	parts := make([]string, len(g.Lines))
	for i, l := range g.Lines {
		parts[i] = strconv.Itoa(l)
	}
	s := strings.Join(parts, ", ")
	if g.Rows > len(g.Lines) {
		s += ", …"
	}
	return s
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

// amounts prints per-currency totals of minor units as money,
// "1.50 EUR, 0.20 USD".
func amounts(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	curs := sortedKeys(m)
	parts := make([]string, len(curs))
	for i, c := range curs {
		parts[i] = printable(money.Display(m[c], c))
	}
	return strings.Join(parts, ", ")
}

// amount prints minor units of cur as money; "-" for a side with no
// amount and no currency (a key with no local record).
func amount(n int64, cur string) string {
	if n == 0 && cur == "" {
		return "-"
	}
	return printable(money.Display(n, cur))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
