package reconcile

import (
	"encoding/csv"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes rep as a page for people: the verdict, counts of the
// four classes that matter (reconciled, under-counted, over-counted,
// drift) and the others, drift per currency, the oldest unreconciled age,
// the provider rows skipped by reason, and one row per finding that is not
// plainly reconciled. Every value is escaped by html/template.
func WriteHTML(w io.Writer, rep *Report) error {
	return evidencePage.Execute(w, evidenceData(rep))
}

// WriteCSV writes rep as CSV, one row per fact: section, name, value, and
// for findings the key's columns. Sections: summary, class, drift_amount,
// skipped_rows, finding, error.
func WriteCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	row := func(f ...string) { _ = cw.Write(f) }
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
		row("drift_amount", cur, strconv.FormatInt(rep.DriftAmount[cur], 10))
	}
	for _, r := range sortedKeys(rep.SkippedRows) {
		row("skipped_rows", r, strconv.Itoa(rep.SkippedRows[r]))
	}
	for _, f := range rep.Findings {
		if f.Class != ClassReconciled {
			row("finding", string(f.Class), "", f.Scope, f.Key, f.ForwardKey,
				money(f.Local, f.LocalCurrency), money(f.Provider, f.ProviderCurrency), f.Detail)
		}
	}
	for _, e := range rep.Errors {
		row("error", "", e)
	}
	cw.Flush()
	return cw.Error()
}

// writeReportFile writes rep to path as HTML or CSV, by its extension,
// through a temporary file renamed into place.
func writeReportFile(path string, rep *Report) error {
	write := WriteHTML
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		write = WriteCSV
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".idem-report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp, rep); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

type evidenceCount struct {
	Class Class
	Keys  int
	Main  bool
}

type evidenceRow struct {
	Name  string
	Value string
}

func evidenceData(rep *Report) map[string]any {
	main := map[Class]bool{ClassReconciled: true, ClassUnderCounted: true, ClassOverCounted: true, ClassDrift: true}
	var counts []evidenceCount
	for _, c := range Classes {
		counts = append(counts, evidenceCount{Class: c, Keys: rep.Counts[c], Main: main[c]})
	}
	var drift, skipped []evidenceRow
	for _, cur := range sortedKeys(rep.DriftAmount) {
		drift = append(drift, evidenceRow{cur, strconv.FormatInt(rep.DriftAmount[cur], 10)})
	}
	for _, r := range sortedKeys(rep.SkippedRows) {
		skipped = append(skipped, evidenceRow{r, strconv.Itoa(rep.SkippedRows[r])})
	}
	var findings []Finding
	for _, f := range rep.Findings {
		if f.Class != ClassReconciled {
			findings = append(findings, f)
		}
	}
	return map[string]any{
		"Rep": rep, "Verdict": verdict(rep), "Clean": rep.Clean() && rep.Complete(),
		"Started": rep.StartedAt.UTC().Format(time.RFC3339), "Took": rep.FinishedAt.Sub(rep.StartedAt).Round(time.Millisecond).String(),
		"Oldest": rep.OldestUnreconciled.Round(time.Second).String(), "Counts": counts, "Drift": drift,
		"Skipped": skipped, "Findings": findings,
		"Since": func() string {
			if rep.ProviderSince.IsZero() {
				return ""
			}
			return rep.ProviderSince.UTC().Format(time.RFC3339)
		}(),
	}
}

var evidencePage = template.Must(template.New("report").Funcs(template.FuncMap{
	"money": money,
	"dash":  orDash,
	"str":   func(c Class) string { return string(c) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem reconcile — {{.Started}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f4f4f4}.num{text-align:right}.bad{color:#a00;font-weight:bold}.ok{color:#070;font-weight:bold}
.minor{color:#777}
</style></head><body>
<h1>Reconciliation report</h1>
<p>Run started {{.Started}}, took {{.Took}}; {{.Rep.Checked}} local records checked.
{{if .Since}}Provider entries applied since {{.Since}} were checked for a local record.{{else}}The provider's entries were not listed: keys with no local record were not looked for.{{end}}</p>
<p>Result: <span class="{{if .Clean}}ok{{else}}bad{{end}}">{{.Verdict}}</span></p>
<h2>Classes</h2>
<table><tr><th>class</th><th>keys</th></tr>
{{range .Counts}}<tr{{if not .Main}} class="minor"{{end}}><td>{{str .Class}}</td><td class="num">{{.Keys}}</td></tr>
{{end}}</table>
<h2>Drift</h2>
<p>{{.Rep.DriftCount}} drift findings. Oldest unreconciled record: {{.Oldest}}.</p>
{{if .Drift}}<table><tr><th>currency</th><th>drift (minor units, sum of absolute differences)</th></tr>
{{range .Drift}}<tr><td>{{.Name}}</td><td class="num">{{.Value}}</td></tr>
{{end}}</table>{{end}}
<h2>Skipped provider rows</h2>
{{if .Skipped}}<table><tr><th>reason</th><th>rows</th></tr>
{{range .Skipped}}<tr><td>{{.Name}}</td><td class="num">{{.Value}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}
<h2>Findings</h2>
{{if .Findings}}<table><tr><th>class</th><th>scope</th><th>key</th><th>forward key</th><th>local</th><th>provider</th><th>detail</th></tr>
{{range .Findings}}<tr><td>{{str .Class}}</td><td>{{dash .Scope}}</td><td>{{.Key}}</td><td>{{.ForwardKey}}</td><td class="num">{{money .Local .LocalCurrency}}</td><td class="num">{{money .Provider .ProviderCurrency}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{else}}<p>Every key reconciled.</p>{{end}}
{{if .Rep.Errors}}<h2>Errors</h2><ul>{{range .Rep.Errors}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Rep.Error}}<p class="bad">The run stopped before it was complete: {{.Rep.Error}}</p>{{end}}
</body></html>
`))
