package deploy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
)

// exported returns every metric name idem's Prometheus adapters export,
// with the _count, _sum and _bucket series of histograms, and each metric's
// label names.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	if _, err := idemprom.NewStoreCollector(reg, st, idemprom.StoreCollectorConfig{}); err != nil {
		t.Fatal(err)
	}
	rm, err := idemprom.NewReconcileMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	unkeyed, err := idemprom.NewUnkeyedRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	unkeyed.Inc("POST", idemprom.UnkeyedForwarded)
	// Touch every labelled series so that it is gathered.
	eng, _ := idem.New(st, idem.Config{Observer: obs})
	_, _ = eng.DoBytes(context.Background(), idem.Request{Key: "k", Operation: "op"},
		func(context.Context, *idem.Attempt) ([]byte, error) { return nil, nil })
	obs.Observe(context.Background(), idem.Event{Kind: idem.EventWait, Duration: time.Millisecond})
	rm.Observe(&reconcile.Report{Counts: map[reconcile.Class]int{}, DriftAmount: map[string]int64{"EUR": 1}}, nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		names[mf.GetName()] = labels
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_count", "_sum", "_bucket"} {
				names[mf.GetName()+s] = labels
			}
		}
	}
	return names
}

// check validates rules against the exported metrics and returns the
// problems found.
func check(rules []rule, names map[string]map[string]bool) []string {
	var bad []string
	seen := map[string]bool{}
	for _, r := range rules {
		where := r.Alert
		if seen[r.Alert] {
			bad = append(bad, where+": alert name used twice")
		}
		seen[r.Alert] = true
		refs := metricsIn(r.Expr)
		if r.Expr == "" || len(refs) == 0 {
			bad = append(bad, where+": expr references no idem metric")
		}
		for _, m := range refs {
			labels, ok := names[m]
			if !ok {
				bad = append(bad, where+": "+m+" is not a metric idem exports")
				continue
			}
			bad = append(bad, checkLabels(where, m, r.Expr, labels)...)
		}
		if r.For != "" && !promDur.MatchString(r.For) {
			bad = append(bad, where+": for "+r.For+" is not a duration")
		}
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			bad = append(bad, where+": needs labels.severity, annotations.summary and annotations.description")
		}
	}
	return bad
}

// checkLabels checks the label matchers written right after metric m.
func checkLabels(where, m, expr string, labels map[string]bool) []string {
	var bad []string
	rest := expr[strings.Index(expr, m)+len(m):]
	sel := labelRef.FindStringSubmatchIndex(rest)
	if sel == nil || sel[0] != 0 {
		return nil
	}
	for _, part := range strings.Split(rest[sel[2]:sel[3]], ",") {
		mm := labelSelect.FindStringSubmatch(part)
		if mm == nil {
			bad = append(bad, where+": cannot read label matcher "+part)
		} else if !labels[mm[1]] {
			bad = append(bad, where+": "+m+" has no label "+mm[1])
		}
	}
	return bad
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseRules(string(src))
	if err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	names := exported(t)
	for _, p := range check(rules, names) {
		t.Error(p)
	}
	// The rules the design asks for: age, freshness, unknowns, drift.
	for _, m := range []string{"idem_reconcile_oldest_unreconciled_age_seconds", "idem_reconcile_last_success_timestamp_seconds",
		"idem_oldest_unknown_age_seconds", "idem_reconcile_drift_count"} {
		found := false
		for _, r := range rules {
			found = found || strings.Contains(r.Expr, m)
		}
		if !found {
			t.Errorf("no alert on %s", m)
		}
	}
}

// TestCheckCatchesMistakes shows that the check is not vacuous: a
// misspelled metric, an unknown label, a missing annotation and a key the
// parser does not know are each reported.
func TestCheckCatchesMistakes(t *testing.T) {
	t.Parallel()
	names := exported(t)
	base := "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: %s\n        labels:\n          severity: page\n        annotations:\n          summary: s\n          description: d\n"
	for expr, want := range map[string]string{
		"idem_reconcile_drift_cnt > 0":                  "not a metric idem exports",
		`idem_reconcile_keys{klass="drift"} > 0`:        "has no label klass",
		"up == 0":                                       "references no idem metric",
		`idem_reconcile_keys{class="over_counted"} > 0`: "",
	} {
		rules, err := parseRules(strings.Replace(base, "%s", quoteIfNeeded(expr), 1))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got := strings.Join(check(rules, names), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("expr %s: problems %q, want %q", expr, got, want)
		}
	}
	noDesc := strings.Replace(strings.Replace(base, "%s", "idem_reconcile_drift_count > 0", 1), "          description: d\n", "", 1)
	if rules, _ := parseRules(noDesc); len(check(rules, names)) == 0 {
		t.Error("a rule without a description passed")
	}
	if _, err := parseRules(strings.Replace(base, "        labels:", "        keep_firing_for: 5m\n        labels:", 1)); err == nil {
		t.Error("an unknown key was accepted")
	}
}

func quoteIfNeeded(expr string) string {
	if strings.ContainsAny(expr, `{}"`) {
		return `'` + expr + `'`
	}
	return expr
}
