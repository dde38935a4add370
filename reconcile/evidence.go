package reconcile

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/reconcile/money"
)

// WriteHTML writes rep as a page for people: the verdict, counts of the
// four classes that matter (reconciled, under-counted, over-counted,
// drift) and the others, drift per currency, the oldest unreconciled age,
// the provider rows skipped by reason, and one row per finding that is not
// plainly reconciled. Every value from the report is HTML-escaped.
func WriteHTML(w io.Writer, rep *Report) error { return writeHTML(w, rep) }

// WriteCSV writes rep as CSV, one row per fact: section, name, value, and
// for findings the key's columns. Sections: summary, class, drift_amount,
// skipped_rows, finding, error. Amounts are money ("12.50 EUR"). It is
// safe to open in a spreadsheet: a cell beginning with =, +, -, @, a tab
// or a carriage return is prefixed with an apostrophe (OWASP's rule for
// CSV injection), and control characters are escaped.
func WriteCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	row := func(f ...string) {
		for i := range f {
			f[i] = csvCell(f[i])
		}
		_ = cw.Write(f)
	}
	row("section", "name", "value", "scope", "key", "forward_key", "local", "provider", "detail")
	row("summary", "result", verdict(rep))
	row("summary", "started_at", rep.StartedAt.UTC().Format(time.RFC3339))
	row("summary", "checked", strconv.Itoa(rep.Checked))
	row("summary", "drift_count", strconv.Itoa(rep.DriftCount))
	row("summary", "oldest_unreconciled_age_seconds", strconv.FormatFloat(rep.OldestUnreconciled.Seconds(), 'f', -1, 64))
	for _, c := range Classes {
		row("class", string(c), strconv.Itoa(rep.Counts[c]))
	}
	for _, cur := range sortedKeys(rep.DriftAmount) {
		row("drift_amount", cur, money.Display(rep.DriftAmount[cur], cur))
	}
	for _, g := range rep.SkippedRows {
		row("skipped_rows", g.Reason, strconv.Itoa(g.Rows), "", "", "", "", "", checked(g)+"; lines "+lines(g))
	}
	for _, f := range rep.Findings {
		if f.Class != ClassReconciled {
			row("finding", string(f.Class), "", f.Scope, f.Key, f.ForwardKey,
				amount(f.Local, f.LocalCurrency), amount(f.Provider, f.ProviderCurrency), f.Detail)
		}
	}
	for _, e := range rep.Errors {
		row("error", "", e)
	}
	cw.Flush()
	return cw.Error()
}

// WriteHTML's page. It is written with html.EscapeString rather than
// html/template: text/template's reflection (MethodByName) makes the linker
// keep every exported method of every reachable type, which grew the idem
// binary by 12 MB (35 → 47 MB). Every value goes through esc; the markup
// around it is constant.
func writeHTML(w io.Writer, rep *Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	main := map[Class]bool{ClassReconciled: true, ClassUnderCounted: true, ClassOverCounted: true, ClassDrift: true, ClassDuplicate: true}
	started := rep.StartedAt.UTC().Format(time.RFC3339)
	p(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem reconcile — %s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f4f4f4}.num{text-align:right}.bad{color:#a00;font-weight:bold}.ok{color:#070;font-weight:bold}
.minor{color:#777}
</style></head><body>
<h1>Reconciliation report</h1>
`, esc(started))
	p("<p>Run started %s, took %s; %d local records checked.\n", esc(started),
		esc(rep.FinishedAt.Sub(rep.StartedAt).Round(time.Millisecond).String()), rep.Checked)
	if rep.ProviderListed {
		p("Provider entries applied since %s were checked for a local record.</p>\n", esc(rep.ProviderSince.UTC().Format(time.RFC3339)))
	} else {
		p("The provider's entries were not listed: keys with no local record were not looked for.</p>\n")
	}
	cls := "bad"
	if verdict(rep) == "clean" {
		cls = "ok"
	}
	p("<p>Result: <span class=\"%s\">%s</span></p>\n", cls, esc(verdict(rep)))
	p("<h2>Classes</h2>\n<table><tr><th>class</th><th>keys</th></tr>\n")
	for _, c := range Classes {
		attr := ""
		if !main[c] {
			attr = ` class="minor"`
		}
		p("<tr%s><td>%s</td><td class=\"num\">%d</td></tr>\n", attr, esc(string(c)), rep.Counts[c])
	}
	p("</table>\n<h2>Drift</h2>\n<p>%d drift findings. Oldest unreconciled record: %s.</p>\n",
		rep.DriftCount, esc(rep.OldestUnreconciled.Round(time.Second).String()))
	if len(rep.DriftAmount) > 0 {
		p("<table><tr><th>currency</th><th>drift (sum of absolute differences)</th></tr>\n")
		for _, cur := range sortedKeys(rep.DriftAmount) {
			p("<tr><td>%s</td><td class=\"num\">%s</td></tr>\n", esc(cur), esc(money.Display(rep.DriftAmount[cur], cur)))
		}
		p("</table>\n")
	}
	p("<h2>Skipped provider rows</h2>\n")
	if len(rep.SkippedRows) == 0 {
		p("<p>None.</p>\n")
	} else {
		p("<table><tr><th>reason</th><th>rows</th><th>checked</th><th>lines</th></tr>\n")
		for _, g := range rep.SkippedRows {
			attr := ""
			if g.Unchecked {
				attr = ` class="bad"`
			}
			p("<tr><td>%s</td><td class=\"num\">%d</td><td%s>%s</td><td>%s</td></tr>\n", esc(g.Reason), g.Rows, attr, esc(checked(g)), esc(lines(g)))
		}
		p("</table>\n")
	}
	p("<h2>Findings</h2>\n")
	var rows int
	for _, f := range rep.Findings {
		if f.Class == ClassReconciled {
			continue
		}
		if rows == 0 {
			p("<table><tr><th>class</th><th>scope</th><th>key</th><th>forward key</th><th>local</th><th>provider</th><th>detail</th></tr>\n")
		}
		rows++
		p("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td></tr>\n",
			esc(string(f.Class)), esc(orDash(f.Scope)), esc(f.Key), esc(f.ForwardKey),
			esc(amount(f.Local, f.LocalCurrency)), esc(amount(f.Provider, f.ProviderCurrency)), esc(f.Detail))
	}
	if rows == 0 {
		p("<p>Every key reconciled.</p>\n")
	} else {
		p("</table>\n")
	}
	if len(rep.Errors) > 0 {
		p("<h2>Errors</h2><ul>")
		for _, e := range rep.Errors {
			p("<li>%s</li>", esc(e))
		}
		p("</ul>\n")
	}
	if rep.Error != "" {
		p("<p class=\"bad\">The run stopped before it was complete: %s</p>\n", esc(rep.Error))
	}
	p("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// esc escapes s for an HTML text node or a quoted attribute value, its
// control characters shown as escapes.
func esc(s string) string { return html.EscapeString(printable(s)) }
