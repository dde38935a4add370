package pgstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// Get implements [idem.Store.Get].
func (o ops) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return nil, errClosed("get")
	}
	rec, err := o.get(ctx, scope, key)
	if err != nil {
		return nil, wrap("get", err)
	}
	return &rec, nil
}

// get returns the driver's "no rows" error untranslated, for callers that
// branch on it.
func (o ops) get(ctx context.Context, scope, key string) (idem.Record, error) {
	return scanRecord(o.db.queryRow(ctx, o.sql.get, scope, key))
}

// List implements [idem.Store.List]. Records are ordered by (CreatedAt,
// Scope, Key), byte order for the strings, which is also the cursor order.
func (o ops) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if f.Limit > 0 { // a page; an unbounded listing takes what it takes
		var cancel context.CancelFunc
		ctx, cancel = o.bound(ctx)
		defer cancel()
	}
	if o.st.closed.Load() {
		return nil, errClosed("list")
	}
	query, args := listQuery(o.sql.list, f)
	rows, err := o.db.query(ctx, query, args...)
	if err != nil {
		return nil, wrap("list", err)
	}
	defer rows.Close()
	var out []idem.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, wrap("list", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list", err)
	}
	return out, nil
}

// listQuery adds only the conditions f uses, so the planner can pick the
// created_at index, the partial index on unknown records, or the primary
// key.
func listQuery(base string, f idem.ListFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Scope != "" {
		where = append(where, "scope = "+arg(f.Scope))
	}
	if len(f.States) == 1 {
		// = rather than = ANY: with an array the planner does not see that
		// an index on created_at yields the list's order, and sorts every
		// row of the state (a second for the first page of a million
		// records); with = it walks the index and stops at the limit.
		where = append(where, "state = "+arg(statecode.Of(f.States[0])))
	} else if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(rune(statecode.Of(s)))
		}
		where = append(where, "state = ANY("+arg(states)+"::\"char\"[])")
	}
	if onlyUnknown(f.States) {
		// The partial index on unknown records (migration 0002) is chosen
		// only for a query that names its predicate.
		where = append(where, "is_unknown")
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+arg(f.CreatedBefore.UTC()))
	}
	if c := f.After; c != nil {
		where = append(where, "(created_at, scope, key) > ("+arg(c.CreatedAt.UTC())+"::timestamptz, "+arg(c.Scope)+"::text, "+arg(c.Key)+"::text)")
	}
	var b strings.Builder
	b.WriteString(base)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY created_at, scope, key")
	if f.Limit > 0 {
		b.WriteString(" LIMIT " + arg(int64(f.Limit)))
	}
	return b.String(), args
}

// sweepClockSlack is how far the clocks of the processes sharing a table
// may disagree for Sweep's bound to hold (see Sweep).
const sweepClockSlack = time.Minute

// Sweep implements [idem.Store.Sweep] with one DELETE that re-checks state
// and expiry on every row it removes. A Limit of 0 or less removes every
// expired record in one statement; the sweeper service passes a batch size.
//
// A batch walks the created_at index from the oldest record (no index
// mentions expires_at, so that a finish stays a HOT update). When nothing
// has expired that walk would read every record, so once this store has
// recorded an outcome, the walk stops at the records created later than
// Now minus the shortest retention it recorded (plus a minute for clock
// skew between processes): a record created after that cannot have
// expired unless another process recorded it with a shorter retention,
// and such a record is then swept late — once the bound passes it — never
// missed. A store that has recorded nothing (a sweeper process of its
// own) walks the whole table.
func (o ops) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return 0, errClosed("sweep")
	}
	var n int64
	var err error
	ttl := time.Duration(o.st.minTTL.Load())
	switch {
	case p.Limit > 0 && ttl > sweepClockSlack:
		n, err = o.db.exec(ctx, o.sql.sweepSince, p.Now.UTC(), int64(p.Limit), p.Now.Add(sweepClockSlack-ttl).UTC())
	case p.Limit > 0:
		n, err = o.db.exec(ctx, o.sql.sweep, p.Now.UTC(), int64(p.Limit))
	default:
		n, err = o.db.exec(ctx, o.sql.sweepUnbounded, p.Now.UTC())
	}
	if err != nil {
		return 0, wrap("sweep", err)
	}
	return int(n), nil
}

// onlyUnknown reports whether states names StateUnknown and nothing else.
func onlyUnknown(states []idem.State) bool {
	for _, s := range states {
		if s != idem.StateUnknown {
			return false
		}
	}
	return len(states) > 0
}
