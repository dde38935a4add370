// Package csvprovider reads a settlement file — the report a payment
// processor publishes of what it applied — as a [ledger.Provider].
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
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/reconcile/ledger"
)

// Columns lists the required header columns.
var Columns = []string{"key", "amount", "currency", "status", "applied_at"}

// Provider is a parsed settlement file. It is read-only and safe for
// concurrent use.
type Provider struct {
	byKey map[string]ledger.Applied
	order []string // keys in file order
}

var _ ledger.Provider = (*Provider)(nil)

// Open reads and parses the settlement file at path.
func Open(path string) (*Provider, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("csvprovider: %w", err)
	}
	defer f.Close()
	p, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return p, nil
}

// Parse reads a settlement file from r.
func Parse(r io.Reader) (*Provider, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // every row as wide as the header
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("csvprovider: empty file: want a header row " + strings.Join(Columns, ","))
	}
	if err != nil {
		return nil, fmt.Errorf("csvprovider: %w", err)
	}
	cols, err := columns(header)
	if err != nil {
		return nil, err
	}
	p := &Provider{byKey: map[string]ledger.Applied{}}
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
		a, err := cols.entry(row)
		if err != nil {
			return nil, fmt.Errorf("csvprovider: line %d: %w", line, err)
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

// Lookup implements [ledger.Provider].
func (p *Provider) Lookup(_ context.Context, key string) (ledger.Applied, error) {
	a, ok := p.byKey[key]
	if !ok {
		return ledger.Applied{}, ledger.ErrNotApplied
	}
	return a, nil
}

// AppliedSince implements [ledger.Provider]: the file's entries at or
// after since, in file order.
func (p *Provider) AppliedSince(ctx context.Context, since time.Time) iter.Seq2[ledger.Applied, error] {
	return func(yield func(ledger.Applied, error) bool) {
		for _, k := range p.order {
			if err := ctx.Err(); err != nil {
				yield(ledger.Applied{}, err)
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

// layout maps column names to positions.
type layout struct {
	key, amount, currency, status, appliedAt, scope int
}

func columns(header []string) (layout, error) {
	pos := map[string]int{}
	for i, h := range header {
		name := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := pos[name]; dup && name != "" {
			return layout{}, fmt.Errorf("csvprovider: header: column %q appears twice", name)
		}
		pos[name] = i
	}
	var missing []string
	for _, c := range Columns {
		if _, ok := pos[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return layout{}, fmt.Errorf("csvprovider: header lacks %s (want %s)", strings.Join(missing, ", "), strings.Join(Columns, ","))
	}
	l := layout{key: pos["key"], amount: pos["amount"], currency: pos["currency"], status: pos["status"],
		appliedAt: pos["applied_at"], scope: -1}
	if i, ok := pos["scope"]; ok {
		l.scope = i
	}
	return l, nil
}

func (l layout) entry(row []string) (ledger.Applied, error) {
	a := ledger.Applied{Key: row[l.key]}
	if a.Key == "" {
		return a, errors.New("empty key")
	}
	amt, err := strconv.ParseInt(strings.TrimSpace(row[l.amount]), 10, 64)
	if err != nil {
		return a, fmt.Errorf("amount %q is not an integer number of minor units", row[l.amount])
	}
	a.Amount = amt
	a.Currency = strings.ToUpper(strings.TrimSpace(row[l.currency]))
	if !isCurrency(a.Currency) {
		return a, fmt.Errorf("currency %q is not a three-letter ISO 4217 code", row[l.currency])
	}
	if a.Status, err = ledger.ParseStatus(strings.ToLower(strings.TrimSpace(row[l.status]))); err != nil {
		return a, err
	}
	if a.AppliedAt, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(row[l.appliedAt])); err != nil {
		return a, fmt.Errorf("applied_at %q is not an RFC 3339 time", row[l.appliedAt])
	}
	a.AppliedAt = a.AppliedAt.UTC()
	if l.scope >= 0 {
		a.Scope = row[l.scope]
	}
	return a, nil
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
