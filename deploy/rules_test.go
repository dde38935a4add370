package deploy

import (
	"fmt"
	"regexp"
	"strings"
)

// rule is one alerting rule of alerts.yml.
type rule struct {
	Alert, Expr, For string
	Labels           map[string]string
	Annotations      map[string]string
	Line             int
}

// parseRules reads the subset of YAML that alerts.yml is written in — a
// groups list of named groups, each with a rules list of alert, expr, for,
// labels and annotations — strictly: any other key, indentation or shape is
// an error naming its line, so the file cannot drift into something this
// check does not understand. Scalars are plain or double-quoted on one line.
func parseRules(src string) ([]rule, error) {
	var rules []rule
	var cur *rule
	var mapping map[string]string // labels or annotations being filled
	sawGroups, inRules := false, false
	for i, raw := range strings.Split(src, "\n") {
		ln := i + 1
		line := strings.TrimRight(raw, " \t\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.Contains(line, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", ln)
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, val, err := keyValue(strings.TrimSpace(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		switch {
		case indent == 0 && key == "groups" && val == "" && !sawGroups:
			sawGroups = true
		case indent == 2 && key == "- name" && val != "" && sawGroups:
			inRules, cur, mapping = false, nil, nil
		case indent == 4 && key == "rules" && val == "":
			inRules = true
		case indent == 6 && key == "- alert" && inRules && val != "":
			rules = append(rules, rule{Alert: val, Labels: map[string]string{}, Annotations: map[string]string{}, Line: ln})
			cur, mapping = &rules[len(rules)-1], nil
		case indent == 8 && cur != nil && (key == "expr" || key == "for") && val != "":
			if key == "expr" {
				cur.Expr = val
			} else {
				cur.For = val
			}
			mapping = nil
		case indent == 8 && cur != nil && key == "labels" && val == "":
			mapping = cur.Labels
		case indent == 8 && cur != nil && key == "annotations" && val == "":
			mapping = cur.Annotations
		case indent == 10 && mapping != nil && val != "" && !strings.HasPrefix(key, "- "):
			if _, dup := mapping[key]; dup {
				return nil, fmt.Errorf("line %d: %s given twice", ln, key)
			}
			mapping[key] = val
		default:
			return nil, fmt.Errorf("line %d: unexpected %q at indentation %d", ln, strings.TrimSpace(line), indent)
		}
	}
	if !sawGroups {
		return nil, fmt.Errorf("no groups")
	}
	return rules, nil
}

// keyValue splits "key: value". A value is plain, double-quoted (no
// escapes) or single-quoted (” for a quote); a plain value may not start
// with a YAML indicator or hold ": " or " #", which would change its meaning.
func keyValue(s string) (key, val string, err error) {
	k, v, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("want key: value, got %q", s)
	}
	val = strings.TrimSpace(v)
	switch {
	case val == "":
	case val[0] == '"':
		inner := strings.TrimSuffix(val[1:], `"`)
		if len(val) < 2 || !strings.HasSuffix(val, `"`) || strings.ContainsAny(inner, `"\`) {
			return "", "", fmt.Errorf("double-quoted value %s: unterminated, or holds a quote or escape", val)
		}
		val = inner
	case val[0] == '\'':
		inner := strings.TrimSuffix(val[1:], "'")
		if len(val) < 2 || !strings.HasSuffix(val, "'") || strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
			return "", "", fmt.Errorf("single-quoted value %s is malformed", val)
		}
		val = strings.ReplaceAll(inner, "''", "'")
	case strings.ContainsRune("{[&*!|>%@`,?#", rune(val[0])) || strings.Contains(val, ": ") || strings.Contains(val, " #"):
		return "", "", fmt.Errorf("value %q needs quotes in YAML", val)
	}
	return strings.TrimSpace(k), val, nil
}

var (
	metricRef   = regexp.MustCompile(`\bidem_[a-z0-9_]+`)
	promDur     = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	labelRef    = regexp.MustCompile(`\{([^}]*)\}`)
	labelSelect = regexp.MustCompile(`^\s*([a-z_]+)\s*(=|!=|=~|!~)\s*"[^"]*"\s*$`)
)

// metricsIn returns the idem metric names an expression references.
func metricsIn(expr string) []string { return metricRef.FindAllString(expr, -1) }
