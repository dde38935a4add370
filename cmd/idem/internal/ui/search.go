package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/durations"
	"github.com/idemkit/idem/reconcile/money"
)

// Query selects records for [Search]: every field set must match.
//
// The store's List applies the scope, the states, the age (older than as
// CreatedBefore, newer than as the starting cursor) and the cursor in its
// query. The store contract has no key, route, operation or amount
// filter, so those are checked here while paging, as the operation filter
// of the unknown list is; a key given with its scope is one Get instead.
type Query struct {
	// Key keeps the record with this key, or with KeyPrefix those whose
	// key starts with it; empty keeps all.
	Key       string
	KeyPrefix bool
	// Scope keeps one scope's records (exact, as stored); empty keeps all.
	Scope string
	// States keeps records in these effective states (an in_progress
	// record whose lease passed is unknown); empty keeps all.
	States []idem.State
	// OlderThan and NewerThan keep records created longer ago, or more
	// recently, than this; 0 keeps all.
	OlderThan, NewerThan time.Duration
	// Route keeps records whose recorded path starts with it.
	Route string
	// Operation keeps records whose intent names this operation or whose
	// recorded method is this (case-insensitive).
	Operation string
	// MinAmount and MaxAmount keep records whose intent's amount, in major
	// units of its currency ("12.50"), lies within them; a record without
	// an amount is left out when either is set.
	MinAmount, MaxAmount string
	// After continues a search from a page's next cursor.
	After *idem.Cursor
}

// SearchPage is one page of a search, oldest first.
type SearchPage struct {
	Records []row
	// Next is where the next page starts; nil at the end.
	Next *idem.Cursor
	// Scanned is how many records were read to fill the page.
	Scanned int
	// Cut is true when the page stopped at the scan bound, not full.
	Cut bool
}

// searchScan bounds how many records one search page reads when the
// filters the store cannot apply leave most of them out: a page never
// reads the whole store, and says where to continue.
const searchScan = 10000

// searchBatch is how many records a search reads per List after its
// first: more than the unknown list's, since a search that filters while
// reading may go through thousands (fewer round trips).
const searchBatch = 1000

// errAmount is a min/max amount that is not a number.
var errAmount = errors.New("not an amount")

// amountScale is the exponent amounts are compared at: the most decimal
// digits an ISO 4217 currency has, so that a bound and a record's amount
// compare exactly whatever the record's currency.
const amountScale = 4

// parseBound reads a min or max amount in major units, at amountScale;
// nil when s is empty.
func parseBound(s string) (*int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	v, err := (money.Format{Unit: money.Major}).Parse(s, amountScale)
	if err != nil {
		return nil, fmt.Errorf("%w: %q (give major units, e.g. 12.50)", errAmount, s)
	}
	return &v, nil
}

// scaled is minor units of a currency with exp digits at amountScale, and
// false when that does not fit an int64 (sign tells which way).
func scaled(minor int64, exp int) (int64, bool) {
	for range amountScale - exp {
		if minor > math.MaxInt64/10 || minor < math.MinInt64/10 {
			return 0, false
		}
		minor *= 10
	}
	return minor, true
}

// matcher is a Query's filters that the store cannot apply.
type matcher struct {
	q        Query
	states   map[idem.State]bool
	min, max *int64
}

func newMatcher(q Query) (*matcher, error) {
	m := &matcher{q: q}
	if len(q.States) > 0 {
		m.states = map[idem.State]bool{}
		for _, s := range q.States {
			m.states[s] = true
		}
	}
	var err error
	if m.min, err = parseBound(q.MinAmount); err != nil {
		return nil, fmt.Errorf("minimum amount: %w", err)
	}
	if m.max, err = parseBound(q.MaxAmount); err != nil {
		return nil, fmt.Errorf("maximum amount: %w", err)
	}
	return m, nil
}

func (m *matcher) match(r *idem.Record, now time.Time) bool {
	q := m.q
	if m.states != nil && !m.states[r.EffectiveState(now)] {
		return false
	}
	switch {
	case q.Key == "":
	case q.KeyPrefix:
		if !strings.HasPrefix(r.Key, q.Key) {
			return false
		}
	case r.Key != q.Key:
		return false
	}
	if q.Route == "" && q.Operation == "" && m.min == nil && m.max == nil {
		return true
	}
	in, err := idem.DecodeIntent(r.Intent)
	if err != nil || in == nil {
		return false
	}
	if q.Route != "" && !strings.HasPrefix(in.Fields["path"], q.Route) {
		return false
	}
	if q.Operation != "" && !strings.EqualFold(in.Operation, q.Operation) && !strings.EqualFold(in.Fields["method"], q.Operation) {
		return false
	}
	if m.min != nil || m.max != nil {
		if in.Amount == 0 && in.Currency == "" {
			return false
		}
		exp, err := money.Exponent(strings.ToUpper(in.Currency))
		if err != nil || exp > amountScale {
			exp = 0 // no currency, or one ISO 4217 does not know: minor units
		}
		v, fits := scaled(in.Amount, exp)
		if m.min != nil && (fits && v < *m.min || !fits && in.Amount < 0) {
			return false
		}
		if m.max != nil && (fits && v > *m.max || !fits && in.Amount > 0) {
			return false
		}
	}
	return true
}

// Search reads one page of the records q selects, oldest first, with the
// store's List and its cursor (never an offset). running, when not nil,
// is the in_progress snapshot the unknown state takes lease-expired
// records from (see [Config.RunningEvery]).
func Search(ctx context.Context, st idem.Store, q Query, pageSize int, now time.Time) (*SearchPage, error) {
	return search(ctx, st, q, pageSize, now, nil)
}

func search(ctx context.Context, st idem.Store, q Query, pageSize int, now time.Time, running *snapshot) (*SearchPage, error) {
	m, err := newMatcher(q)
	if err != nil {
		return nil, err
	}
	if q.Key != "" && !q.KeyPrefix && q.Scope != "" {
		return searchOne(ctx, st, q, m, now)
	}
	lf := idem.ListFilter{Scope: q.Scope, After: q.After, Limit: min(pageSize+1, listBatch)}
	if q.OlderThan > 0 {
		lf.CreatedBefore = now.Add(-q.OlderThan).UTC()
	}
	if q.NewerThan > 0 {
		from := &idem.Cursor{CreatedAt: now.Add(-q.NewerThan).UTC()}
		if lf.After == nil || before(&idem.Record{CreatedAt: lf.After.CreatedAt, Scope: lf.After.Scope, Key: lf.After.Key},
			&idem.Record{CreatedAt: from.CreatedAt}) {
			lf.After = from
		}
	}
	streams := searchStreams(st, lf, q.States, running)
	for _, x := range streams {
		x.batch = searchBatch
	}
	page := &SearchPage{}
	prev := q.After
	for {
		r, err := nextOf(ctx, streams)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return page, nil
		}
		if len(page.Records) == pageSize || page.Scanned >= searchScan {
			page.Next, page.Cut = prev, len(page.Records) < pageSize
			return page, nil
		}
		page.Scanned++
		prev = &idem.Cursor{CreatedAt: r.CreatedAt, Scope: r.Scope, Key: r.Key}
		if m.match(r, now) {
			page.Records = append(page.Records, toRow(r, now))
		}
	}
}

// searchOne answers a search for one key in one scope with a Get.
func searchOne(ctx context.Context, st idem.Store, q Query, m *matcher, now time.Time) (*SearchPage, error) {
	page := &SearchPage{}
	if q.After != nil {
		return page, nil // a single record has no second page
	}
	r, err := st.Get(ctx, q.Scope, q.Key)
	if errors.Is(err, idem.ErrNotFound) {
		return page, nil
	}
	if err != nil {
		return nil, err
	}
	page.Scanned = 1
	created := r.CreatedAt
	if m.match(r, now) && (q.OlderThan <= 0 || created.Before(now.Add(-q.OlderThan))) &&
		(q.NewerThan <= 0 || created.After(now.Add(-q.NewerThan))) {
		page.Records = append(page.Records, toRow(r, now))
	}
	return page, nil
}

// searchStreams is one List stream per stored state the wanted effective
// states need, merged in List order by nextOf: a store walks its (state,
// created) index for one state and stops after the page, where one List
// of several states sorts them all. No state wanted is one List of every
// record.
func searchStreams(st idem.Store, lf idem.ListFilter, want []idem.State, running *snapshot) []*stream {
	if len(want) == 0 {
		return []*stream{{st: st, lf: lf}}
	}
	w := map[idem.State]bool{}
	for _, s := range want {
		w[s] = true
	}
	var out []*stream
	add := func(s idem.State) {
		x := &stream{st: st, lf: lf}
		x.lf.States = []idem.State{s}
		out = append(out, x)
	}
	for _, s := range []idem.State{idem.StateUnknown, idem.StateSucceeded, idem.StateFailed} {
		if w[s] {
			add(s)
		}
	}
	switch {
	case w[idem.StateInProgress]:
		add(idem.StateInProgress) // live leases are not in the snapshot's sense: read them now
	case w[idem.StateUnknown] && running != nil:
		out = append(out, &stream{done: true, buf: running.matching(lf)})
	case w[idem.StateUnknown]:
		add(idem.StateInProgress)
	}
	return out
}

// nextOf pops whichever stream's record comes first in List order.
func nextOf(ctx context.Context, ss []*stream) (*idem.Record, error) {
	var take *stream
	var first *idem.Record
	for _, s := range ss {
		r, err := s.peek(ctx)
		if err != nil {
			return nil, err
		}
		if r != nil && (first == nil || before(r, first)) {
			take, first = s, r
		}
	}
	if take == nil {
		return nil, nil
	}
	r := take.buf[0]
	take.buf = take.buf[1:]
	return &r, nil
}

// listStates are the states the search form offers.
var listStates = []idem.State{idem.StateUnknown, idem.StateInProgress, idem.StateSucceeded, idem.StateFailed}

// queryParams are the search form's fields, in the order links carry them.
var queryParams = []string{"key", "match", "scope", "state", "older", "newer", "route", "op", "min", "max"}

// parseQuery reads a search from a URL's query; problem says what could
// not be read (the rest still applies).
func parseQuery(v url.Values) (Query, string) {
	q := Query{Key: strings.TrimSpace(v.Get("key")), KeyPrefix: v.Get("match") == "prefix",
		Scope: v.Get("scope"), Route: strings.TrimSpace(v.Get("route")), Operation: strings.TrimSpace(v.Get("op")),
		MinAmount: strings.TrimSpace(v.Get("min")), MaxAmount: strings.TrimSpace(v.Get("max"))}
	var problems []string
	for _, s := range v["state"] {
		switch st := idem.State(s); st {
		case idem.StateUnknown, idem.StateInProgress, idem.StateSucceeded, idem.StateFailed:
			q.States = append(q.States, st)
		case "":
		default:
			problems = append(problems, fmt.Sprintf("state %q is not one of unknown, in_progress, succeeded, failed", s))
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"older", &q.OlderThan}, {"newer", &q.NewerThan}} {
		if s := strings.TrimSpace(v.Get(d.name)); s != "" {
			x, err := durations.Parse(s)
			if err != nil || x < 0 {
				problems = append(problems, d.name+" than: "+s+" is not a duration (15m, 2d)")
				continue
			}
			*d.to = x
		}
	}
	c, err := decodeCursor(v.Get("after"))
	if err != nil {
		problems = append(problems, err.Error())
	}
	q.After = c
	return q, strings.Join(problems, "; ")
}

// searchLink is the URL of a search with q's form fields and a cursor.
func searchLink(v url.Values, after *idem.Cursor) string {
	out := url.Values{}
	for _, k := range queryParams {
		for _, x := range v[k] {
			if x != "" {
				out.Add(k, x)
			}
		}
	}
	if after != nil {
		out.Set("after", encodeCursor(after))
	}
	return "/records?" + out.Encode()
}

func (s *Server) recordsList(w http.ResponseWriter, r *http.Request, sess *session) {
	v := r.URL.Query()
	q, problem := parseQuery(v)
	now := s.cfg.Now()
	data := map[string]any{"Title": "Records", "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "records",
		"Q": v, "First": q.After == nil, "States": listStates, "Checked": map[string]bool{}, "Problem": problem,
		"ProviderOn": s.cfg.Provider != nil}
	for _, st := range q.States {
		data["Checked"].(map[string]bool)[string(st)] = true
	}
	page, err := search(r.Context(), s.cfg.Store, q, s.cfg.PageSize, now, s.runningView())
	switch {
	case errors.Is(err, errAmount):
		data["Problem"] = strings.TrimPrefix(problem+"; "+err.Error(), "; ")
		page = &SearchPage{}
	case err != nil:
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	data["Page"] = page
	if page.Next != nil {
		data["Next"] = searchLink(v, page.Next)
	}
	data["FirstLink"] = searchLink(v, nil)
	data["CanDecide"] = sess.can(RoleDecider)
	data["Pushed"], data["Filtered"] = describeQuery(q)
	s.render(w, http.StatusOK, "records", data)
}

// describeQuery says which of a query's filters the store applied and
// which were checked while reading, for the page to show.
func describeQuery(q Query) (pushed, filtered []string) {
	if q.Key != "" && !q.KeyPrefix && q.Scope != "" {
		return []string{"key and scope (one read)"}, nil
	}
	if q.Scope != "" {
		pushed = append(pushed, "scope")
	}
	if len(q.States) > 0 {
		pushed = append(pushed, "state")
	}
	if q.OlderThan > 0 || q.NewerThan > 0 {
		pushed = append(pushed, "age")
	}
	if q.Key != "" {
		filtered = append(filtered, "key")
	}
	if q.Route != "" {
		filtered = append(filtered, "route")
	}
	if q.Operation != "" {
		filtered = append(filtered, "operation")
	}
	if q.MinAmount != "" || q.MaxAmount != "" {
		filtered = append(filtered, "amount")
	}
	return pushed, filtered
}
