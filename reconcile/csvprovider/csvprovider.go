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
// columns can be read as it is. A key may appear only once; a malformed row
// is an error naming its line, never skipped.
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
	byKey   map[string]reconcile.Applied
	order   []string // keys in file order
	skipped map[string]int
}

var (
	_ reconcile.Provider   = (*Provider)(nil)
	_ reconcile.RowSkipper = (*Provider)(nil)
)

// Open reads and parses the settlement file at path in the [CSV] layout.
func Open(path string) (*Provider, error) { return OpenLayout(path, CSV()) }

// OpenLayout reads and parses the settlement file at path in layout l.
func OpenLayout(path string, l Layout) (*Provider, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("csvprovider: %w", err)
	}
	defer f.Close()
	p, err := ParseLayout(f, l)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return p, nil
}

// Parse reads a settlement file in the [CSV] layout from r.
func Parse(r io.Reader) (*Provider, error) { return ParseLayout(r, CSV()) }

// ParseLayout reads a settlement file in layout l from r. Rows that settle
// no intent (by type, status or a missing key, as l says) are counted in
// [Provider.SkippedRows]; any other row that cannot be read is an error
// naming its line.
func ParseLayout(r io.Reader, l Layout) (*Provider, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // every row as wide as the header
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("csvprovider: empty file: want a header row " + strings.Join(l.headers(), ","))
	}
	if err != nil {
		return nil, fmt.Errorf("csvprovider: %w", err)
	}
	cols, err := l.columns(header)
	if err != nil {
		return nil, err
	}
	p := &Provider{byKey: map[string]reconcile.Applied{}, skipped: map[string]int{}}
	firstLine := map[string]int{}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return nil, fmt.Errorf("csvprovider: %w", err)
		}
		line, _ := cr.FieldPos(0)
		a, skip, err := cols.entry(row)
		if err != nil {
			return nil, fmt.Errorf("csvprovider: line %d: %w", line, err)
		}
		if skip != "" {
			p.skipped[skip]++
			continue
		}
		if first, dup := firstLine[a.Key]; dup {
			return nil, fmt.Errorf("csvprovider: line %d: key %q appears again (first on line %d)", line, a.Key, first)
		}
		firstLine[a.Key] = line
		p.byKey[a.Key] = a
		p.order = append(p.order, a.Key)
	}
}

// Len returns the number of entries.
func (p *Provider) Len() int { return len(p.order) }

// SkippedRows implements [reconcile.RowSkipper]: the rows that settle no
// intent, by reason ("type payout", "no key", "status skip: pending").
func (p *Provider) SkippedRows() map[string]int { return p.skipped }

// Lookup implements [reconcile.Provider].
func (p *Provider) Lookup(_ context.Context, key string) (reconcile.Applied, error) {
	a, ok := p.byKey[key]
	if !ok {
		return reconcile.Applied{}, reconcile.ErrNotApplied
	}
	return a, nil
}

// AppliedSince implements [reconcile.Provider]: the file's entries at or
// after since, in file order.
func (p *Provider) AppliedSince(ctx context.Context, since time.Time) iter.Seq2[reconcile.Applied, error] {
	return func(yield func(reconcile.Applied, error) bool) {
		for _, k := range p.order {
			if err := ctx.Err(); err != nil {
				yield(reconcile.Applied{}, err)
				return
			}
			a := p.byKey[k]
			if a.AppliedAt.Before(since) {
				continue
			}
			if !yield(a, nil) {
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

// columnSet is a layout bound to a header: each field's position, or -1.
type columnSet struct {
	l   *Layout
	pos map[string]int
}

func (l *Layout) columns(header []string) (columnSet, error) {
	at := map[string]int{}
	for i, h := range header {
		name := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := at[name]; dup && name != "" {
			return columnSet{}, fmt.Errorf("csvprovider: header: column %q appears twice", name)
		}
		at[name] = i
	}
	cs := columnSet{l: l, pos: map[string]int{}}
	var missing []string
	for _, f := range Fields {
		c := l.Columns[f]
		if c == "" {
			cs.pos[f] = -1
			continue
		}
		i, ok := at[strings.ToLower(strings.TrimSpace(c))]
		_, hasType := at[strings.ToLower(strings.TrimSpace(l.Columns[FieldType]))]
		switch {
		case ok:
			cs.pos[f] = i
		case slices.Contains(l.Optional, f), f == FieldStatus && l.Columns[FieldType] != "" && hasType:
			// Without a status column, the type's values are mapped.
			cs.pos[f] = -1
		default:
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return columnSet{}, fmt.Errorf("csvprovider: header lacks %s (the %s layout wants %s; map others with FIELD=COLUMN)",
			strings.Join(missing, ", "), l.name(), strings.Join(l.headers(), ","))
	}
	return cs, nil
}

func (c columnSet) cell(row []string, field string) string {
	if i := c.pos[field]; i >= 0 {
		return strings.TrimSpace(row[i])
	}
	return ""
}

// entry reads one row: its entry, or the reason it settles no intent.
func (c columnSet) entry(row []string) (reconcile.Applied, string, error) {
	l := c.l
	var a reconcile.Applied
	typ := c.cell(row, FieldType)
	if !l.keeps(typ) {
		return a, "type " + orEmpty(typ), nil
	}
	sv := c.cell(row, FieldStatus)
	if c.pos[FieldStatus] < 0 {
		sv = typ
	}
	out, err := l.outcome(sv)
	if err != nil {
		return a, "", err
	}
	if out == OutcomeSkip {
		return a, "status skip: " + orEmpty(strings.ToLower(sv)), nil
	}
	a.Key = c.cell(row, FieldKey)
	if a.Key == "" {
		if l.SkipKeyless {
			return a, "no key", nil
		}
		return a, "", errors.New("empty key")
	}
	if out == OutcomeRefund {
		rk := l.RefundKey
		if rk == nil {
			rk = DefaultRefundKey
		}
		k, err := rk(a.Key)
		if err != nil {
			return a, "", fmt.Errorf("refund: %w", err)
		}
		a.Key = k
	}
	a.Status = reconcile.StatusApplied
	if out == OutcomeFailed {
		a.Status = reconcile.StatusFailed
	}
	a.Currency = strings.ToUpper(c.cell(row, FieldCurrency))
	if !isCurrency(a.Currency) {
		return a, "", fmt.Errorf("currency %q is not a three-letter ISO 4217 code", c.cell(row, FieldCurrency))
	}
	if a.Amount, err = c.amount(row, a.Currency); err != nil {
		return a, "", err
	}
	if a.AppliedAt, err = c.time(row); err != nil {
		return a, "", err
	}
	a.Scope = c.cell(row, FieldScope)
	a.Reference = c.cell(row, FieldReference)
	return a, "", nil
}

func orEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// amount reads the amount column, or the debit column when it is empty.
func (c columnSet) amount(row []string, cur string) (int64, error) {
	l := c.l
	exp := 0
	if l.Amount.Unit == money.Major {
		e, err := l.Exponents.Exponent(cur)
		if err != nil {
			return 0, fmt.Errorf("currency %q: %w", cur, err)
		}
		exp = e
	}
	s, debit := c.cell(row, FieldAmount), false
	if s == "" && c.pos[FieldDebit] >= 0 {
		s, debit = c.cell(row, FieldDebit), true
	}
	n, err := l.Amount.Parse(s, exp)
	if err != nil {
		if l.Amount.Unit == money.Minor {
			return 0, fmt.Errorf("amount %q is not an integer number of minor units", s)
		}
		return 0, fmt.Errorf("amount %q: %w", s, err)
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
func (c columnSet) time(row []string) (time.Time, error) {
	l := c.l
	s := c.cell(row, FieldAppliedAt)
	if len(l.TimeLayouts) == 0 {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, fmt.Errorf("applied_at %q is not an RFC 3339 time", s)
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
			return time.Time{}, err
		}
		loc = z
	}
	for _, layout := range l.TimeLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("applied_at %q is not a time in the form %s", s, l.TimeLayouts[0])
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
