// Package csvprovider reads a settlement file — the report a payment
// processor publishes of what it applied — as a [reconcile.Provider].
//
// The file is CSV (RFC 4180) with a header row. These columns are required,
// in any order:
//
//	key         the forwarded key (the provider's idempotency key)
//	amount      integer minor units (cents): "1250", never "12.50"
//	currency    ISO 4217 code, three letters ("EUR"); upper-cased
//	status      applied | failed ("succeeded" and "settled" mean applied,
//	            "declined" means failed)
//	applied_at  RFC 3339 time ("2025-03-01T12:00:00Z")
//
// An optional scope column names the local scope of a key that has no local
// record. Other columns are ignored, so a processor's report with extra
// columns can be read as it is. A key listed more than once is kept with
// its repeats ([reconcile.Applied].Repeats): the reconciler reports it as a
// possible double application, and every other key still reconciles. A
// row that cannot be read is an error naming its line and column
// ([RowError]), never skipped.
//
// Example:
//
//	key,amount,currency,status,applied_at
//	charge:v1:order-1,1250,EUR,applied,2025-03-01T12:00:00Z
//	charge:v1:order-2,990,EUR,failed,2025-03-01T12:01:30Z
package csvprovider

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/money"
)

// Columns lists the required header columns of the [CSV] layout.
var Columns = []string{"key", "amount", "currency", "status", "applied_at"}

// Provider is a parsed settlement file. It is read-only and safe for
// concurrent use.
type Provider struct {
	byKey   map[string]reconcile.Applied // the first entry of each key, with its repeats
	order   []string                     // keys in file order
	skipped []reconcile.SkippedRows
}

var (
	_ reconcile.Provider    = (*Provider)(nil)
	_ reconcile.RowSkipper  = (*Provider)(nil)
	_ reconcile.OlderLister = (*Provider)(nil)
)

// RowError is a settlement file's row (or header) that cannot be read: it
// names the file, the line and the column, as the user sees them.
type RowError struct {
	// File is the file's name, when known.
	File string
	// Line is the 1-based line the row starts on.
	Line int
	// Column is the 1-based column (field) number, or 0 for the row as a
	// whole.
	Column int
	// Header is the column's header, when Column is set.
	Header string
	// Err says what is wrong.
	Err error
}

func (e *RowError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	fmt.Fprintf(&b, "line %d", e.Line)
	if e.Column > 0 {
		fmt.Fprintf(&b, ", column %d", e.Column)
		if e.Header != "" {
			fmt.Fprintf(&b, " (%s)", e.Header)
		}
	}
	return b.String() + ": " + e.Err.Error()
}

func (e *RowError) Unwrap() error { return e.Err }

// Open reads and parses the settlement file at path in the [CSV] layout.
func Open(path string) (*Provider, error) { return OpenLayout(path, CSV()) }

// OpenLayout reads and parses the settlement file at path in layout l.
// Errors name the file as path's base name.
func OpenLayout(path string, l Layout) (*Provider, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the path
	}
	defer f.Close()
	p, err := ParseLayout(f, l)
	var re *RowError
	if errors.As(err, &re) {
		re.File = filepath.Base(path)
	} else if err != nil {
		err = fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return p, err
}

// Parse reads a settlement file in the [CSV] layout from r.
func Parse(r io.Reader) (*Provider, error) { return ParseLayout(r, CSV()) }

// ParseLayout reads a settlement file in layout l from r. Rows that settle
// no intent (by type, status or a missing key, as l says) and rows whose
// key idem cannot attribute (a refund of a key that has no derivable
// refund key) are listed in [Provider.SkippedRows]; any other row that
// cannot be read is a [*RowError].
func ParseLayout(r io.Reader, l Layout) (*Provider, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // every row as wide as the header
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &RowError{Line: 1, Err: errors.New("empty file: want a header row " + strings.Join(l.headers(), ","))}
	}
	if err != nil {
		return nil, csvError(err, header)
	}
	cols, err := l.columns(header)
	if err != nil {
		return nil, &RowError{Line: 1, Err: err}
	}
	p := &Provider{byKey: map[string]reconcile.Applied{}}
	skips := skipSet{}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			p.skipped = skips.list()
			return p, nil
		}
		if err != nil {
			return nil, csvError(err, header, row...)
		}
		line, _ := cr.FieldPos(0)
		a, sk, rerr := cols.entry(row)
		if rerr != nil {
			rerr.Line = line
			return nil, rerr
		}
		if sk.reason != "" {
			skips.add(sk, line)
			continue
		}
		a.Line = line
		if first, dup := p.byKey[a.Key]; dup {
			first.Repeats = append(first.Repeats, a)
			p.byKey[a.Key] = first
			continue
		}
		p.byKey[a.Key] = a
		p.order = append(p.order, a.Key)
	}
}

// csvError turns encoding/csv's error into one naming the line.
func csvError(err error, header []string, row ...string) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return &RowError{Line: pe.StartLine, Err: fmt.Errorf("the row has %d fields, the header %d", len(row), len(header))}
	}
	return &RowError{Line: pe.Line, Err: fmt.Errorf("character %d: %w", pe.Column, pe.Err)}
}

// skip is why a row settles no intent, and whether it may hide one.
type skip struct {
	reason    string
	unchecked bool
}

// skipSet groups skipped rows by reason, in the order reasons appear.
type skipSet map[string]*reconcile.SkippedRows

func (s skipSet) add(sk skip, line int) {
	g := s[sk.reason]
	if g == nil {
		g = &reconcile.SkippedRows{Reason: sk.reason, Unchecked: sk.unchecked}
		s[sk.reason] = g
	}
	g.Rows++
	if len(g.Lines) < reconcile.MaxSkippedLines {
		g.Lines = append(g.Lines, line)
	}
}

func (s skipSet) list() []reconcile.SkippedRows {
	out := make([]reconcile.SkippedRows, 0, len(s))
	for _, g := range s {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b reconcile.SkippedRows) int { return strings.Compare(a.Reason, b.Reason) })
	return out
}

// Len returns the number of keys.
func (p *Provider) Len() int { return len(p.order) }

// SkippedRows implements [reconcile.RowSkipper]: the rows that settle no
// intent or that idem cannot attribute, by reason ("type payout", "no
// key", "status skip: pending", "refund of a key not in idem's form").
func (p *Provider) SkippedRows() []reconcile.SkippedRows { return p.skipped }

// Lookup implements [reconcile.Provider]: the key's first entry, with its
// repeats.
func (p *Provider) Lookup(_ context.Context, key string) (reconcile.Applied, error) {
	a, ok := p.byKey[key]
	if !ok {
		return reconcile.Applied{}, reconcile.ErrNotApplied
	}
	return a, nil
}

// AppliedSince implements [reconcile.Provider]: each key whose first entry
// was applied at or after since, once, in file order.
func (p *Provider) AppliedSince(ctx context.Context, since time.Time) iter.Seq2[reconcile.Applied, error] {
	return p.entries(ctx, func(a reconcile.Applied) bool { return !a.AppliedAt.Before(since) })
}

// AppliedBefore implements [reconcile.OlderLister]: each key whose first
// entry was applied before t, once, in file order.
func (p *Provider) AppliedBefore(ctx context.Context, t time.Time) iter.Seq2[reconcile.Applied, error] {
	return p.entries(ctx, func(a reconcile.Applied) bool { return a.AppliedAt.Before(t) })
}

func (p *Provider) entries(ctx context.Context, keep func(reconcile.Applied) bool) iter.Seq2[reconcile.Applied, error] {
	return func(yield func(reconcile.Applied, error) bool) {
		for _, k := range p.order {
			if err := ctx.Err(); err != nil {
				yield(reconcile.Applied{}, err)
				return
			}
			if a := p.byKey[k]; keep(a) && !yield(a, nil) {
				return
			}
		}
	}
}

// headers lists the layout's required headers, for messages.
func (l *Layout) headers() []string {
	var hs []string
	for _, f := range Fields {
		if c := l.Columns[f]; c != "" && !slices.Contains(l.Optional, f) {
			hs = append(hs, c)
		}
	}
	return hs
}

// columnSet is a layout bound to a header: each field's position, or -1,
// and the header it was found under.
type columnSet struct {
	l      *Layout
	pos    map[string]int
	header []string
}

func normHeader(h string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
}

func (l *Layout) columns(header []string) (columnSet, error) {
	at := map[string]int{}
	for i, h := range header {
		name := normHeader(h)
		if _, dup := at[name]; dup && name != "" {
			return columnSet{}, fmt.Errorf("the header has column %q twice", strings.TrimSpace(h))
		}
		at[name] = i
	}
	find := func(f string) (int, bool) {
		for _, c := range l.candidates(f) {
			if i, ok := at[normHeader(c)]; ok {
				return i, true
			}
		}
		return -1, false
	}
	cs := columnSet{l: l, pos: map[string]int{}, header: header}
	_, hasType := find(FieldType)
	var missing []string
	for _, f := range Fields {
		cands := l.candidates(f)
		if len(cands) == 0 {
			cs.pos[f] = -1
			continue
		}
		i, ok := find(f)
		switch {
		case ok:
			cs.pos[f] = i
		case slices.Contains(l.Optional, f), f == FieldStatus && hasType:
			// Without a status column, the type's values are mapped.
			cs.pos[f] = -1
		default:
			missing = append(missing, fmt.Sprintf("%s (for %s)", strings.Join(quoteAll(cands), " or "), f))
		}
	}
	if len(missing) > 0 {
		return columnSet{}, fmt.Errorf("the header has no column %s: the %s layout wants %s; name another column with FIELD=COLUMN",
			strings.Join(missing, ", "), l.name(), strings.Join(l.headers(), ","))
	}
	return cs, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func (c columnSet) cell(row []string, field string) string {
	if i := c.pos[field]; i >= 0 {
		return strings.TrimSpace(row[i])
	}
	return ""
}

// bad is a RowError for field's column (the line is filled by the caller).
func (c columnSet) bad(field string, err error) *RowError {
	i := c.pos[field]
	if i < 0 {
		return &RowError{Err: err}
	}
	return &RowError{Column: i + 1, Header: strings.TrimSpace(strings.TrimPrefix(c.header[i], "\ufeff")), Err: err}
}

// entry reads one row: its entry, or why it settles no intent.
func (c columnSet) entry(row []string) (reconcile.Applied, skip, *RowError) {
	l := c.l
	var a reconcile.Applied
	typ := c.cell(row, FieldType)
	if !l.keeps(typ) {
		return a, skip{reason: "type " + orEmpty(typ)}, nil
	}
	sv, sf := c.cell(row, FieldStatus), FieldStatus
	if c.pos[FieldStatus] < 0 {
		sv, sf = typ, FieldType
	}
	out, err := l.outcome(sv)
	if err != nil {
		return a, skip{}, c.bad(sf, err)
	}
	if out == OutcomeSkip {
		return a, skip{reason: "status skip: " + orEmpty(strings.ToLower(sv))}, nil
	}
	a.Key = c.cell(row, FieldKey)
	if a.Key == "" {
		if l.SkipKeyless {
			return a, skip{reason: "no key"}, nil
		}
		return a, skip{}, c.bad(FieldKey, errors.New("the key is empty"))
	}
	if out == OutcomeRefund {
		rk := l.RefundKey
		if rk == nil {
			rk = DefaultRefundKey
		}
		k, err := rk(a.Key)
		if err != nil {
			// A refund of a key idem did not make, or made in a form
			// the refund key cannot be derived from: it cannot be
			// attributed to a refund intent, and a double refund among
			// such rows would not be seen.
			return a, skip{reason: "refund of a key not in idem's form (see --refund-key)", unchecked: true}, nil
		}
		a.Key = k
	}
	a.Status = reconcile.StatusApplied
	if out == OutcomeFailed {
		a.Status = reconcile.StatusFailed
	}
	a.Currency = strings.ToUpper(c.cell(row, FieldCurrency))
	if _, over := l.Exponents[a.Currency]; !over && !money.Known(a.Currency) {
		return a, skip{}, c.bad(FieldCurrency, fmt.Errorf("%q is not an ISO 4217 currency code", c.cell(row, FieldCurrency)))
	}
	var rerr *RowError
	if a.Amount, rerr = c.amount(row, a.Currency); rerr != nil {
		return a, skip{}, rerr
	}
	if a.AppliedAt, rerr = c.time(row); rerr != nil {
		return a, skip{}, rerr
	}
	a.Scope = c.cell(row, FieldScope)
	a.Reference = c.cell(row, FieldReference)
	return a, skip{}, nil
}

func orEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// amount reads the amount column, or the debit column when it is empty.
func (c columnSet) amount(row []string, cur string) (int64, *RowError) {
	l := c.l
	field := FieldAmount
	s, debit := c.cell(row, FieldAmount), false
	if s == "" && c.pos[FieldDebit] >= 0 {
		s, debit, field = c.cell(row, FieldDebit), true, FieldDebit
	}
	exp := 0
	if l.Amount.Unit == money.Major {
		e, err := l.Exponents.Exponent(cur)
		if err != nil {
			return 0, c.bad(FieldCurrency, err)
		}
		exp = e
	}
	n, err := l.Amount.Parse(s, exp)
	if err != nil {
		if l.Amount.Unit == money.Minor {
			return 0, c.bad(field, fmt.Errorf("%q is not an integer number of minor units", s))
		}
		if strings.Contains(err.Error(), "decimals") {
			err = fmt.Errorf("%w (%s has %d)", err, cur, exp)
		}
		return 0, c.bad(field, err)
	}
	if debit {
		n = -n
	}
	if l.Magnitude && n < 0 {
		n = -n
	}
	return n, nil
}

// time reads applied_at in the layout's formats and the row's zone.
func (c columnSet) time(row []string) (time.Time, *RowError) {
	l := c.l
	s := c.cell(row, FieldAppliedAt)
	if len(l.TimeLayouts) == 0 {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, c.bad(FieldAppliedAt, fmt.Errorf("%q is not an RFC 3339 time", s))
		}
		return t.UTC(), nil
	}
	loc := l.Location
	if loc == nil {
		loc = time.UTC
	}
	if c.pos[FieldTimeZone] >= 0 {
		z, err := zone(c.cell(row, FieldTimeZone))
		if err != nil {
			return time.Time{}, c.bad(FieldTimeZone, err)
		}
		loc = z
	}
	for _, layout := range l.TimeLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, c.bad(FieldAppliedAt, fmt.Errorf("%q is not a time in the form %s", s, l.TimeLayouts[0]))
}
