package mutation

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is what [Run] found.
type Report struct {
	// Results holds one result per mutation, in the order run.
	Results []Result
	// Duration is the whole run's, the copy and the baseline included.
	Duration time.Duration
}

// Failed reports whether the gate fails: a mutation survived, hung, was
// invalid or was not run.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Status != Killed {
			return true
		}
	}
	return false
}

// Tally counts results by status.
type Tally struct {
	Item                                   string
	Total, Killed, Survived, Hung, Invalid int
	NotRun                                 int
}

// Rate is the share of mutations killed, in percent.
func (t Tally) Rate() float64 {
	if t.Total == 0 {
		return 0
	}
	return 100 * float64(t.Killed) / float64(t.Total)
}

func (t *Tally) add(s Status) {
	t.Total++
	switch s {
	case Killed:
		t.Killed++
	case Survived:
		t.Survived++
	case Hung:
		t.Hung++
	case Invalid:
		t.Invalid++
	default:
		t.NotRun++
	}
}

// ByItem tallies the results per checklist item, in the order of [Items]
// then alphabetically, and the total last (Item "all").
func (r *Report) ByItem() []Tally {
	m := map[string]*Tally{}
	all := Tally{Item: "all"}
	for _, res := range r.Results {
		t := m[res.Mutation.Item]
		if t == nil {
			t = &Tally{Item: res.Mutation.Item}
			m[res.Mutation.Item] = t
		}
		t.add(res.Status)
		all.add(res.Status)
	}
	var out []Tally
	for _, it := range Items {
		if t := m[it]; t != nil {
			out = append(out, *t)
			delete(m, it)
		}
	}
	rest := make([]string, 0, len(m))
	for it := range m {
		rest = append(rest, it)
	}
	sort.Strings(rest)
	for _, it := range rest {
		out = append(out, *m[it])
	}
	return append(out, all)
}

// WriteSummary writes the mutations that did not pass, with where each
// is listed, then the tally.
func (r *Report) WriteSummary(w io.Writer) {
	var bad []Result
	for _, res := range r.Results {
		if res.Status != Killed {
			bad = append(bad, res)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "\nnot killed:\n")
		for _, res := range bad {
			fmt.Fprintf(w, "  %-8s %s (%s, %s): %s\n", res.Status, res.Mutation.ID, res.Mutation.Item, res.Mutation.Source, res.Reason)
		}
	}
	all := r.ByItem()
	t := all[len(all)-1]
	fmt.Fprintf(w, "\n%d mutations: %d killed, %d survived, %d hung, %d invalid", t.Total, t.Killed, t.Survived, t.Hung, t.Invalid)
	if t.NotRun > 0 {
		fmt.Fprintf(w, ", %d not run", t.NotRun)
	}
	fmt.Fprintf(w, " (kill rate %.1f %%) in %s\n", t.Rate(), r.Duration.Round(time.Second))
}

// WriteMarkdown writes the kill rate per checklist item as a Markdown
// table.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| checklist item | mutations | killed | survived | hung | invalid | kill rate |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, t := range r.ByItem() {
		name := t.Item
		if name == "all" {
			name = "**all**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s |\n", name, t.Total, t.Killed, t.Survived, t.Hung, t.Invalid, rate(t))
	}
}

func rate(t Tally) string {
	s := fmt.Sprintf("%.1f %%", t.Rate())
	return strings.Replace(s, ".0 %", " %", 1)
}
