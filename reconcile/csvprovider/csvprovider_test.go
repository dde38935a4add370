package csvprovider_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

const file = "\ufeffkey,amount,currency,status,applied_at,scope,fee\n" +
	"charge:v1:o-1,1250,eur,applied,2025-03-01T12:00:00Z,shop,30\n" +
	"charge:v1:o-2,990,EUR,declined,2025-03-01T13:00:00+01:00,,0\n" +
	"\"refund:v1:o,3\",-500,USD,settled,2025-03-02T00:00:00Z,shop,0\n"

func TestParse(t *testing.T) {
	t.Parallel()
	p, err := csvprovider.Parse(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := p.Lookup(ctx, "charge:v1:o-1")
	want := reconcile.Applied{Key: "charge:v1:o-1", Scope: "shop", Amount: 1250, Currency: "EUR",
		Status: reconcile.StatusApplied, AppliedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	if err != nil || !a.AppliedAt.Equal(want.AppliedAt) || a.Key != want.Key || a.Amount != want.Amount ||
		a.Currency != want.Currency || a.Status != want.Status || a.Scope != want.Scope {
		t.Fatalf("Lookup = %+v, %v; want %+v", a, err, want)
	}
	if a, _ := p.Lookup(ctx, "charge:v1:o-2"); a.Status != reconcile.StatusFailed || a.AppliedAt.Location() != time.UTC || a.AppliedAt.Hour() != 12 {
		t.Fatalf("declined row = %+v", a)
	}
	if a, _ := p.Lookup(ctx, "refund:v1:o,3"); a.Amount != -500 {
		t.Fatalf("quoted key row = %+v", a)
	}
	if _, err := p.Lookup(ctx, "nope"); !errors.Is(err, reconcile.ErrNotApplied) {
		t.Fatalf("missing key: %v", err)
	}
	var keys []string
	for a, err := range p.AppliedSince(ctx, time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC)) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	if strings.Join(keys, "|") != "refund:v1:o,3" {
		t.Fatalf("AppliedSince = %v", keys)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	head := "key,amount,currency,status,applied_at\n"
	for name, tc := range map[string]struct{ in, want string }{
		"empty":          {"", "line 1: empty file"},
		"missing column": {"key,amount,currency,status\n", `line 1: the header has no column "applied_at"`},
		"duplicate col":  {"key,key,amount,currency,status,applied_at\n", `line 1: the header has column "key" twice`},
		"decimal amount": {head + "k,12.50,EUR,applied,2025-03-01T12:00:00Z\n", `line 2, column 2 (amount): "12.50" is not an integer number of minor units`},
		"bad currency":   {head + "k,1,EURO,applied,2025-03-01T12:00:00Z\n", `line 2, column 3 (currency): "EURO" is not an ISO 4217`},
		"bad status":     {head + "k,1,EUR,pending,2025-03-01T12:00:00Z\n", `line 2, column 4 (status): status "pending" is not mapped`},
		"bad time":       {head + "k,1,EUR,applied,2025-03-01\n", `line 2, column 5 (applied_at): "2025-03-01" is not an RFC 3339 time`},
		"empty key":      {head + ",1,EUR,applied,2025-03-01T12:00:00Z\n", "line 2, column 1 (key): the key is empty"},
		"short row":      {head + "k,1,EUR\n", "line 2: the row has 3 fields, the header 5"},
		"bare quote":     {head + "k,1\"2,EUR,applied,2025-03-01T12:00:00Z\n", `line 2: character 4: bare " in non-quoted-field`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := csvprovider.Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestRepeatedKey: a key listed twice is kept with its repeat (a possible
// double application, for the reconciler to report), not refused, and
// every other key of the file is still read.
func TestRepeatedKey(t *testing.T) {
	t.Parallel()
	in := "key,amount,currency,status,applied_at\n" +
		"k,100,EUR,applied,2025-03-01T12:00:00Z\n" +
		"other,5,EUR,applied,2025-03-01T12:00:00Z\n" +
		"k,100,EUR,applied,2025-03-01T12:05:00Z\n"
	p, err := csvprovider.Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := p.Lookup(ctx, "k")
	if err != nil || a.Line != 2 || len(a.Repeats) != 1 || a.Repeats[0].Line != 4 || a.Repeats[0].Amount != 100 {
		t.Fatalf("Lookup(k) = %+v, %v; want line 2 with its repeat on line 4", a, err)
	}
	if o, err := p.Lookup(ctx, "other"); err != nil || o.Amount != 5 || p.Len() != 2 {
		t.Fatalf("Lookup(other) = %+v, %v; %d keys", o, err, p.Len())
	}
	n := 0
	for range p.AppliedSince(ctx, time.Time{}) {
		n++
	}
	if n != 2 {
		t.Fatalf("AppliedSince yields %d entries, want each key once", n)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settlement.csv")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := csvprovider.Open(path)
	if err != nil || p.Len() != 3 {
		t.Fatalf("Open = %v entries, %v", p, err)
	}
	if _, err := csvprovider.Open(filepath.Join(t.TempDir(), "absent.csv")); err == nil {
		t.Fatal("absent file accepted")
	}
	// Errors name the user's file, line and column.
	bad := filepath.Join(t.TempDir(), "psp-2026-12.csv")
	if err := os.WriteFile(bad, []byte("key,amount,currency,status,applied_at\nk,1,EUR,applied,yesterday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = csvprovider.Open(bad)
	var re *csvprovider.RowError
	if !errors.As(err, &re) || err.Error() != `psp-2026-12.csv: line 2, column 5 (applied_at): "yesterday" is not an RFC 3339 time` {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(file)
	f.Add("key,amount,currency,status,applied_at\nk,1,EUR,applied,2025-03-01T12:00:00Z\n")
	f.Add("key,amount\n\"unterminated")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := csvprovider.Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		for a, err := range p.AppliedSince(context.Background(), time.Time{}) {
			if err != nil || a.Key == "" || len(a.Currency) != 3 {
				t.Fatalf("parsed entry %+v, %v", a, err)
			}
			if got, err := p.Lookup(context.Background(), a.Key); err != nil || got.Amount != a.Amount {
				t.Fatalf("Lookup(%q) = %+v, %v", a.Key, got, err)
			}
		}
	})
}
