package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/durations"
)

func urlQuery(s string) string { return url.QueryEscape(s) }

// UnknownFilter selects unknown records for [ListUnknown].
type UnknownFilter struct {
	// OlderThan keeps records created longer ago than this; 0 keeps all.
	OlderThan time.Duration
	// Operation keeps records whose intent names this operation, or whose
	// method is this (the proxy records the method); empty keeps all.
	Operation string
	// Scope keeps one scope's records; empty keeps all.
	Scope string
	// After continues a listing from a page's next cursor.
	After *idem.Cursor
}

// UnknownPage is one page of unknown records, oldest first.
type UnknownPage struct {
	Records []row
	// Next is where the next page starts; nil at the end.
	Next *idem.Cursor
	// Scanned is how many records were read to fill the page: more than
	// len(Records) when a filter the store cannot apply (the operation, a
	// live lease) left some out.
	Scanned int
}

// Paging bounds. The store applies scope, age, state and the cursor in
// its query; the operation and the lease are checked here, so a page
// reads batches of listBatch records and stops after maxScan even if it is
// not full: a rare operation costs more pages, never one slow page.
const (
	listBatch = 200
	maxScan   = 5000
)

// ListUnknown reads one page of unknown records (and in_progress records
// whose lease has passed, which every reader treats as unknown), oldest
// first, with the store's List and its cursor, never an offset: the cost
// of a page does not grow with how far into the list it is.
//
// Each state is listed on its own and the two lists are merged here. One
// List of both states would be simpler, but a store cannot walk an index
// in creation order across two states: SQLite and PostgreSQL then sort
// every unknown record to return the first fifty (a third of a second on
// a million records), where one state walks its index and stops after
// the page.
func ListUnknown(ctx context.Context, st idem.Store, f UnknownFilter, pageSize int, now time.Time) (*UnknownPage, error) {
	return listUnknown(ctx, st, f, pageSize, now, nil)
}

// listUnknown is ListUnknown, with the in_progress records taken from
// running, a snapshot (see [Config.RunningEvery]), when it is not nil:
// PostgreSQL keeps no index on in_progress records (one would make every
// first-time finish a non-HOT update; see pgstore's migration 0002), so
// listing them walks every record, half a second on a million, which the
// snapshot pays in the background rather than on each page.
func listUnknown(ctx context.Context, st idem.Store, f UnknownFilter, pageSize int, now time.Time, running *snapshot) (*UnknownPage, error) {
	lf := idem.ListFilter{Scope: f.Scope, After: f.After, Limit: min(pageSize+1, listBatch)}
	if f.OlderThan > 0 {
		lf.CreatedBefore = now.Add(-f.OlderThan).UTC()
	}
	unknown, live := &stream{st: st, lf: lf}, &stream{st: st, lf: lf}
	unknown.lf.States = []idem.State{idem.StateUnknown}
	live.lf.States = []idem.State{idem.StateInProgress}
	if running != nil {
		live = &stream{done: true, buf: running.matching(lf)}
	}
	page := &UnknownPage{}
	prev := f.After // the position of the last record read
	for {
		r, err := next(ctx, unknown, live)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return page, nil // the end of the list
		}
		if len(page.Records) == pageSize || page.Scanned >= maxScan {
			page.Next = prev // r is the first record of the next page
			return page, nil
		}
		page.Scanned++
		prev = &idem.Cursor{CreatedAt: r.CreatedAt, Scope: r.Scope, Key: r.Key}
		if r.EffectiveState(now) == idem.StateUnknown && matchOperation(r, f.Operation) {
			page.Records = append(page.Records, toRow(r, now))
		}
	}
}

// stream reads one state's records in List order, a batch at a time.
type stream struct {
	st   idem.Store
	lf   idem.ListFilter
	buf  []idem.Record
	done bool
	// batch is how many records each List after the first asks for;
	// 0 is listBatch.
	batch int
}

func (s *stream) peek(ctx context.Context) (*idem.Record, error) {
	if len(s.buf) == 0 && !s.done {
		recs, err := s.st.List(ctx, s.lf)
		if err != nil {
			return nil, err
		}
		s.done = len(recs) < s.lf.Limit
		if n := len(recs); n > 0 {
			last := &recs[n-1]
			s.lf.After = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
		}
		s.buf, s.lf.Limit = recs, listBatch
		if s.batch > 0 {
			s.lf.Limit = s.batch
		}
	}
	if len(s.buf) == 0 {
		return nil, nil
	}
	return &s.buf[0], nil
}

// next pops whichever stream's record comes first in List order
// (created, then scope, then key, byte order as the stores sort).
func next(ctx context.Context, a, b *stream) (*idem.Record, error) {
	ra, err := a.peek(ctx)
	if err != nil {
		return nil, err
	}
	rb, err := b.peek(ctx)
	if err != nil {
		return nil, err
	}
	take := a
	switch {
	case ra == nil && rb == nil:
		return nil, nil
	case ra == nil:
		take = b
	case rb != nil && before(rb, ra):
		take = b
	}
	r := take.buf[0]
	take.buf = take.buf[1:]
	return &r, nil
}

func before(x, y *idem.Record) bool {
	if !x.CreatedAt.Equal(y.CreatedAt) {
		return x.CreatedAt.Before(y.CreatedAt)
	}
	if x.Scope != y.Scope {
		return x.Scope < y.Scope
	}
	return x.Key < y.Key
}

func matchOperation(r *idem.Record, op string) bool {
	if op == "" {
		return true
	}
	in, err := idem.DecodeIntent(r.Intent)
	if err != nil || in == nil {
		return false
	}
	return strings.EqualFold(in.Operation, op) || strings.EqualFold(in.Fields["method"], op)
}

func (s *Server) unknownList(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	f := UnknownFilter{Operation: strings.TrimSpace(q.Get("op")), Scope: strings.TrimSpace(q.Get("scope"))}
	var problem string
	if v := strings.TrimSpace(q.Get("older")); v != "" {
		d, err := durations.Parse(v)
		if err != nil {
			problem = "age: " + err.Error()
		}
		f.OlderThan = d
	}
	after, err := decodeCursor(q.Get("after"))
	if err != nil {
		problem = err.Error()
	}
	f.After = after
	now := s.cfg.Now()
	page, err := listUnknown(r.Context(), s.cfg.Store, f, s.cfg.PageSize, now, s.runningView())
	if err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	next := ""
	if page.Next != nil {
		v := url.Values{"after": {encodeCursor(page.Next)}}
		for _, k := range []string{"older", "op", "scope"} {
			if q.Get(k) != "" {
				v.Set(k, q.Get(k))
			}
		}
		next = "/unknown?" + v.Encode()
	}
	s.render(w, http.StatusOK, "unknown", map[string]any{
		"Title": "Unknown records", "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "unknown",
		"Page": page, "Next": next, "First": after == nil, "Problem": problem,
		"Older": q.Get("older"), "Op": q.Get("op"), "Scope": q.Get("scope"),
		"Released": q.Get("released"), "ProviderOn": s.cfg.Provider != nil, "CanDecide": sess.can(RoleDecider),
	})
}

// maxRunning bounds the in_progress records a snapshot holds: far more
// than any fleet has in flight; beyond it the snapshot is cut (and says
// so in the log), oldest records kept.
const maxRunning = 100_000

// snapshot is the store's in_progress records at one time, in List order.
type snapshot struct {
	at   time.Time
	recs []idem.Record
	// hidden, when not nil, leaves out the records this process decided
	// after the snapshot was taken (see [decided]); a page sets it on its
	// own shallow copy.
	hidden func(r *idem.Record) bool
}

// takeSnapshot lists every in_progress record, a batch at a time.
func takeSnapshot(ctx context.Context, st idem.Store, now time.Time) (*snapshot, bool, error) {
	sn := &snapshot{at: now}
	lf := idem.ListFilter{States: []idem.State{idem.StateInProgress}, Limit: 1000}
	for {
		recs, err := st.List(ctx, lf)
		if err != nil {
			return nil, false, err
		}
		sn.recs = append(sn.recs, recs...)
		if len(sn.recs) >= maxRunning {
			sn.recs = sn.recs[:maxRunning]
			return sn, true, nil
		}
		if len(recs) < lf.Limit {
			return sn, false, nil
		}
		last := &recs[len(recs)-1]
		lf.After = &idem.Cursor{CreatedAt: last.CreatedAt, Scope: last.Scope, Key: last.Key}
	}
}

// matching returns the snapshot's records lf selects (scope, age, cursor),
// in List order.
func (sn *snapshot) matching(lf idem.ListFilter) []idem.Record {
	var out []idem.Record
	for i := range sn.recs {
		r := &sn.recs[i]
		if lf.Scope != "" && r.Scope != lf.Scope {
			continue
		}
		if !lf.CreatedBefore.IsZero() && !r.CreatedAt.Before(lf.CreatedBefore) {
			continue
		}
		if c := lf.After; c != nil && !before(&idem.Record{CreatedAt: c.CreatedAt, Scope: c.Scope, Key: c.Key}, r) {
			continue
		}
		if sn.hidden != nil && sn.hidden(r) {
			continue
		}
		out = append(out, *r)
	}
	return out
}

// decided remembers the records this process decided since the last
// in_progress snapshot was taken, so that a page never shows one of them
// from a snapshot older than the decision: without it a record decided a
// moment ago (an in_progress record whose lease had passed, listed from the
// snapshot) stayed on the unknown list for up to RunningEvery, and its link
// answered "No such record". Records read live from the store need no
// overlay: the store already has the decision.
type decided struct {
	mu sync.Mutex
	m  map[[2]string]decidedEntry
}

// decidedEntry is one decision: the fence it was taken on and when it
// was applied.
type decidedEntry struct {
	fromFence int64
	at        time.Time
}

// note records a decision applied at at on the record (scope, key) as it
// was at fence fromFence (0: whatever fence it had).
func (d *decided) note(scope, key string, fromFence int64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[[2]string]decidedEntry{}
	}
	d.m[[2]string{scope, key}] = decidedEntry{fromFence: fromFence, at: at}
}

// stale reports whether r, read from a snapshot, is a record this process
// has decided since: the decision was on r's fence or a later one, and r
// was claimed before it (a claim made after a release is a new record,
// fence 1 again, and is shown).
func (d *decided) stale(r *idem.Record) bool {
	d.mu.Lock()
	e, ok := d.m[[2]string{r.Scope, r.Key}]
	d.mu.Unlock()
	return ok && (e.fromFence == 0 || r.Fence <= e.fromFence) && !r.CreatedAt.After(e.at)
}

// forget drops the decisions applied before a snapshot started listing:
// that snapshot already reflects them.
func (d *decided) forget(before time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.m {
		if e.at.Before(before) {
			delete(d.m, k)
		}
	}
}

// overlaid wraps a Decide function so that each decision it applies is
// noted in d at once.
func overlaid(d *decided, now func() time.Time, decide func(context.Context, Decision) (*idem.Record, error)) func(context.Context, Decision) (*idem.Record, error) {
	return func(ctx context.Context, dec Decision) (*idem.Record, error) {
		rec, err := decide(ctx, dec)
		if err == nil {
			d.note(dec.Scope, dec.Key, dec.IfFence, now())
		}
		return rec, err
	}
}

// runningView is the latest in_progress snapshot without the records this
// process decided since it was taken; nil when pages list them live.
func (s *Server) runningView() *snapshot {
	sn := s.running.Load()
	if sn == nil {
		return nil
	}
	return &snapshot{at: sn.at, recs: sn.recs, hidden: s.decided.stale}
}
