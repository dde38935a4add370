package reconcile_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
)

// Keys, scopes and details come from requests and settlement files: the
// HTML report escapes every one of them.
func TestWriteHTMLEscapes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 19, 5, 2, 0, time.UTC)
	rep := &reconcile.Report{StartedAt: now, FinishedAt: now, Counts: map[reconcile.Class]int{reconcile.ClassDrift: 1},
		DriftAmount: map[string]int64{"EUR": 10}, SkippedRows: []reconcile.SkippedRows{{Reason: `type <img src=x onerror=alert(1)>`, Rows: 1}},
		Findings: []reconcile.Finding{{Class: reconcile.ClassDrift, Scope: `"><script>s()</script>`, Key: "<b>k</b>",
			ForwardKey: "fk&", Local: 1, LocalCurrency: "EUR", Provider: 11, ProviderCurrency: "EUR", Detail: "a<b"}},
		Errors: []string{"<i>e</i>"}}
	var b bytes.Buffer
	if err := reconcile.WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"<script>", "<b>k", "<img", "<i>e", "a<b", "fk&<"} {
		if strings.Contains(out, bad) {
			t.Errorf("report contains %q unescaped:\n%s", bad, out)
		}
	}
	for _, want := range []string{"&lt;b&gt;k&lt;/b&gt;", "&#34;&gt;&lt;script&gt;", "fk&amp;", "<td>EUR</td><td class=\"num\">0.10 EUR</td>", "FOUND 1 drift"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
