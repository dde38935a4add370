package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Counter is a count of the effects the API under test has made so far
// (charges created, rows inserted, messages sent): the auditor reads it
// before and after each probe and compares the difference with the
// effects the probe's intents allow. [Fixture] is one; --effects-url reads
// one over HTTP.
type Counter interface {
	Effects(ctx context.Context) (int64, error)
}

// effectsSource names where the audit's effect counts come from, for the
// report: "effects-url", "fixture" (an in-process [Counter]) or "none".
func (a *Auditor) effectsSource() string {
	switch {
	case a.o.EffectsURL != "":
		return "effects-url"
	case a.o.Counter != nil:
		return "fixture"
	}
	return "none"
}

// urlCounts is how many requests one counted probe spends reading the
// count: two with --effects-url (before and after), none otherwise.
func (a *Auditor) urlCounts() int {
	if a.o.EffectsURL != "" {
		return 2
	}
	return 0
}

// effects reads the effect count; ok is false without a count source.
func (a *Auditor) effects(ctx context.Context) (n int64, ok bool, err error) {
	switch {
	case a.o.Counter != nil:
		n, err := a.o.Counter.Effects(ctx)
		if err != nil {
			return 0, true, fmt.Errorf("effect count: %w", err)
		}
		return n, true, nil
	case a.o.EffectsURL == "":
		return 0, false, nil
	}
	if err := a.take(ctx); err != nil {
		return 0, true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.o.EffectsURL, nil)
	if err != nil {
		return 0, true, err
	}
	for k, v := range a.header {
		if k != "Content-Type" {
			req.Header[k] = v
		}
	}
	res, err := a.client.Do(req)
	if err != nil {
		return 0, true, fmt.Errorf("--effects-url: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusOK {
		return 0, true, fmt.Errorf("--effects-url answered %d", res.StatusCode)
	}
	n, err = parseCount(b, a.o.EffectsMetric)
	if err != nil {
		return 0, true, fmt.Errorf("--effects-url: %w", err)
	}
	return n, true, nil
}

// parseCount reads an effect count from an --effects-url answer. Without
// metric it is a plain integer, or a JSON object with an integer "count"
// member. With metric it is the Prometheus text format, and the count is
// the sum of metric's samples: metric is a name (every series of it), or
// a name with label matchers, name{label="value",…}, which a series
// matches when it has each of those labels with that value.
func parseCount(b []byte, metric string) (int64, error) {
	s := strings.TrimSpace(string(b))
	if metric != "" {
		return promCount(s, metric)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	var obj struct {
		Count *json.Number `json:"count"`
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if d.Decode(&obj) == nil && obj.Count != nil {
		if n, err := obj.Count.Int64(); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("answered %s, not a count (an integer, or {\"count\": N}; for the Prometheus format pass --effects-metric)", clipText(s))
}

// promCount sums metric's samples in a Prometheus text exposition.
func promCount(s, metric string) (int64, error) {
	name, want, err := parseSeries(metric)
	if err != nil {
		return 0, fmt.Errorf("--effects-metric %q: %w", metric, err)
	}
	var sum float64
	var found bool
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ \t")
		if end < 0 || line[:end] != name {
			continue
		}
		series, rest := line, ""
		if line[end] == '{' {
			c := closingBrace(line)
			if c < 0 {
				return 0, fmt.Errorf("sample %s: labels not closed", clipText(line))
			}
			series, rest = line[:c+1], line[c+1:]
		} else {
			series, rest = line[:end], line[end:]
		}
		_, labels, err := parseSeries(series)
		if err != nil {
			return 0, fmt.Errorf("sample %s: %w", clipText(line), err)
		}
		if !matches(labels, want) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("sample %s has no value", clipText(line))
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("sample %s: value %q is not a number", clipText(line), fields[0])
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s in the answer", metric)
	}
	if sum != math.Trunc(sum) || math.Abs(sum) > 1<<53 {
		return 0, fmt.Errorf("%s sums to %g, not a count", metric, sum)
	}
	return int64(sum), nil
}

// closingBrace returns the index of the } closing line's label set, or -1.
func closingBrace(line string) int {
	quoted, escaped := false, false
	for i := strings.IndexByte(line, '{'); i < len(line); i++ {
		switch c := line[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

// parseSeries splits name{label="value",…} into the name and its labels.
func parseSeries(s string) (string, map[string]string, error) {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		if s == "" || strings.ContainsAny(s, " \t\"}") {
			return "", nil, errors.New("not a metric name")
		}
		return s, nil, nil
	}
	name, rest := s[:i], s[i+1:]
	if name == "" || !strings.HasSuffix(rest, "}") {
		return "", nil, errors.New("want NAME or NAME{label=\"value\",…}")
	}
	rest = strings.TrimSuffix(rest, "}")
	labels := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
			return "", nil, fmt.Errorf("label matcher %q: want label=\"value\"", rest)
		}
		label := strings.TrimSpace(rest[:eq])
		var v strings.Builder
		j, closed := eq+2, false
		for ; j < len(rest); j++ {
			c := rest[j]
			if c == '\\' && j+1 < len(rest) {
				j++
				switch rest[j] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[j])
				}
				continue
			}
			if c == '"' {
				closed = true
				break
			}
			v.WriteByte(c)
		}
		if !closed {
			return "", nil, fmt.Errorf("label %s: value not closed", label)
		}
		labels[label] = v.String()
		rest = strings.TrimSpace(rest[j+1:])
		rest = strings.TrimPrefix(rest, ",")
	}
	return name, labels, nil
}

// matches reports whether labels has every label of want with its value.
func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
