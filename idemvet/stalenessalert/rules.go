package stalenessalert

import (
	"regexp"

	"gopkg.in/yaml.v3"
)

// Rule is one alerting or recording rule of a Prometheus rule file.
type Rule struct {
	Alert, Record, Expr string
	Line                int
}

// Finding is a rule file that alerts on reconciliation counts and on no
// reconciliation age.
type Finding struct {
	Line    int // of the first count alert
	Alert   string
	Message string
}

var (
	reconRE = regexp.MustCompile(`(?i)reconcil|drift|mismatch|discrepan|settlement`)
	// An age or staleness: a metric named so, or now minus a timestamp.
	staleRE = regexp.MustCompile(`(?i)(_age|age_|oldest|stale|last_success|last_run|lastsuccess|_lag|timestamp|since)|\btime\(\)`)
)

// Parse returns the rules of a Prometheus rule file (groups at the top, or
// under spec: in a PrometheusRule resource); ok is false when content is
// not one.
func Parse(content []byte) (rules []Rule, ok bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil || len(doc.Content) == 0 {
		return nil, false
	}
	root := doc.Content[0]
	groups := get(root, "groups")
	if groups == nil {
		if spec := get(root, "spec"); spec != nil {
			groups = get(spec, "groups")
		}
	}
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, false
	}
	for _, g := range groups.Content {
		rs := get(g, "rules")
		if rs == nil || rs.Kind != yaml.SequenceNode {
			continue
		}
		for _, r := range rs.Content {
			var rule Rule
			rule.Line = r.Line
			if n := get(r, "alert"); n != nil {
				rule.Alert, rule.Line = n.Value, n.Line
			}
			if n := get(r, "record"); n != nil {
				rule.Record = n.Value
			}
			if n := get(r, "expr"); n != nil {
				rule.Expr = n.Value
			}
			rules = append(rules, rule)
		}
	}
	return rules, true
}

func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// Check reports a rule file whose alerts watch reconciliation counts but
// none watches how old the oldest unreconciled record is, or how long
// since reconciliation last succeeded.
func Check(rules []Rule) []Finding {
	var first *Rule
	for i := range rules {
		r := &rules[i]
		if r.Alert == "" || !reconRE.MatchString(r.Expr) {
			continue
		}
		if staleRE.MatchString(r.Expr) {
			return nil
		}
		if first == nil {
			first = r
		}
	}
	if first == nil {
		return nil
	}
	return []Finding{{
		Line:  first.Line,
		Alert: first.Alert,
		Message: "alert " + first.Alert + " watches reconciliation counts, and no alert in this file watches their age: a stuck reconciliation is invisible in a count that stays flat; " +
			"alert on the oldest unreconciled record's age (idem_reconcile_oldest_unreconciled_age_seconds) or on time() - the last successful run (idem_reconcile_last_success_timestamp_seconds)",
	}}
}
