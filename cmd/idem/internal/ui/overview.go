package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/idemkit/idem"
)

// countCap bounds how many records of one state the overview counts: the
// store contract has no count, so counting is listing, and a page must
// not read a million rows. Beyond it the overview says "at least". The
// states an operator acts on (unknown, in_progress) are counted further
// than the decided ones, which are most of a store and carry responses.
const (
	countCap         = 10000
	countCapTerminal = 1000
)

type stateCount struct {
	State string
	N     int
	AtLst bool // N is a lower bound (countCap reached)
}

// countStates counts records by effective state: an in_progress record
// past its lease counts as unknown.
func countStates(ctx context.Context, st idem.Store, now time.Time) ([]stateCount, error) {
	counts := map[idem.State]*stateCount{}
	for _, s := range []idem.State{idem.StateInProgress, idem.StateUnknown, idem.StateSucceeded, idem.StateFailed} {
		counts[s] = &stateCount{State: string(s)}
	}
	for _, s := range []idem.State{idem.StateInProgress, idem.StateUnknown, idem.StateSucceeded, idem.StateFailed} {
		limit := countCap
		if s.Terminal() {
			limit = countCapTerminal
		}
		recs, err := st.List(ctx, idem.ListFilter{States: []idem.State{s}, Limit: limit + 1})
		if err != nil {
			return nil, err
		}
		if len(recs) > limit {
			counts[s].AtLst = true
			recs = recs[:limit]
		}
		for i := range recs {
			counts[recs[i].EffectiveState(now)].N++
		}
	}
	out := make([]stateCount, 0, 4)
	for _, s := range []idem.State{idem.StateUnknown, idem.StateInProgress, idem.StateSucceeded, idem.StateFailed} {
		out = append(out, *counts[s])
	}
	return out, nil
}

// storeChart draws records created in the last day per hour, by state:
// what the store can tell without metrics (it never sees replays).
func storeChart(ctx context.Context, st idem.Store, now time.Time) (*chart, error) {
	c := &chart{Title: "records created per hour, by state now", Source: "from the store (the last 24 hours; replays write nothing, so they are not counted: give --metrics-url for them)"}
	start := now.Add(-storeChartWindow).Truncate(time.Hour).Add(time.Hour)
	recs, err := st.List(ctx, idem.ListFilter{After: &idem.Cursor{CreatedAt: start}, Limit: storeChartCap})
	if err != nil {
		return nil, err
	}
	if len(recs) == storeChartCap {
		c.Source += fmt.Sprintf("; only the first %d records of the window are drawn", storeChartCap)
	}
	buckets := int(now.Sub(start)/time.Hour) + 1
	names := []idem.State{idem.StateSucceeded, idem.StateFailed, idem.StateUnknown, idem.StateInProgress}
	vals := map[idem.State][]float64{}
	for _, n := range names {
		vals[n] = make([]float64, buckets)
	}
	for i := range recs {
		b := int(recs[i].CreatedAt.Sub(start) / time.Hour)
		if b >= 0 && b < buckets {
			vals[recs[i].EffectiveState(now)][b]++
		}
	}
	for i := 0; i < buckets; i++ {
		c.Labels = append(c.Labels, start.Add(time.Duration(i)*time.Hour).UTC().Format("15:04"))
	}
	for _, n := range names {
		s := series{Name: string(n), Color: colorOf(string(n)), Values: vals[n]}
		for _, v := range s.Values {
			s.Total += v
		}
		c.Series = append(c.Series, s)
	}
	if len(recs) == 0 {
		c.Empty = "no records were created in the last 24 hours"
	}
	return c, nil
}

// reconcileSummary is the part of `idem reconcile --json`'s report the
// overview shows.
type reconcileSummary struct {
	StartedAt          time.Time        `json:"started_at"`
	FinishedAt         time.Time        `json:"finished_at"`
	Checked            int              `json:"checked"`
	Counts             map[string]int   `json:"counts"`
	DriftCount         int              `json:"drift_count"`
	DriftAmount        map[string]int64 `json:"drift_amount"`
	OldestUnreconciled float64          `json:"oldest_unreconciled_age_seconds"`
	Error              string           `json:"error"`
	Errors             []string         `json:"errors"`

	File      string
	Classes   [][2]string
	Drift     []string
	OldestAge time.Duration
	Problem   string
}

func readReconcile(path string) *reconcileSummary {
	if path == "" {
		return nil
	}
	out := &reconcileSummary{File: path}
	b, err := os.ReadFile(path)
	if err != nil {
		out.Problem = err.Error()
		return out
	}
	if err := json.Unmarshal(b, out); err != nil {
		out.Problem = "not a report of idem reconcile --json: " + err.Error()
		return out
	}
	for k, v := range out.Counts {
		out.Classes = append(out.Classes, [2]string{k, thousands(v)})
	}
	sort.Slice(out.Classes, func(i, j int) bool { return out.Classes[i][0] < out.Classes[j][0] })
	for cur, v := range out.DriftAmount {
		out.Drift = append(out.Drift, formatAmount(v, cur))
	}
	sort.Strings(out.Drift)
	out.OldestAge = time.Duration(out.OldestUnreconciled * float64(time.Second))
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, now := r.Context(), s.cfg.Now()
	counts, err := countStates(ctx, s.cfg.Store, now)
	if err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	oldest, err := listUnknown(ctx, s.cfg.Store, UnknownFilter{}, 1, now, s.runningView())
	if err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	data := map[string]any{"Title": "Overview", "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "overview",
		"Counts": counts, "Reconcile": readReconcile(s.cfg.ReconcileReport), "Now": now}
	if len(oldest.Records) > 0 {
		data["Oldest"] = oldest.Records[0]
	}
	var c *chart
	if s.metrics != nil {
		var ratio float64
		var has bool
		c, ratio, has = metricsChart(s.metrics.samples())
		if has {
			data["DupRatio"] = fmt.Sprintf("%.1f%%", ratio*100)
		}
	} else if c, err = storeChart(ctx, s.cfg.Store, now); err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	data["Chart"] = c
	s.render(w, http.StatusOK, "overview", data)
}
