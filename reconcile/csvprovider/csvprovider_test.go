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
		"empty":          {"", "empty file"},
		"missing column": {"key,amount,currency,status\n", "lacks applied_at"},
		"duplicate col":  {"key,key,amount,currency,status,applied_at\n", "appears twice"},
		"decimal amount": {head + "k,12.50,EUR,applied,2025-03-01T12:00:00Z\n", "line 2: amount"},
		"bad currency":   {head + "k,1,EURO,applied,2025-03-01T12:00:00Z\n", "currency"},
		"bad status":     {head + "k,1,EUR,pending,2025-03-01T12:00:00Z\n", `status "pending" is not mapped`},
		"bad time":       {head + "k,1,EUR,applied,2025-03-01\n", "applied_at"},
		"empty key":      {head + ",1,EUR,applied,2025-03-01T12:00:00Z\n", "empty key"},
		"duplicate key":  {head + "k,1,EUR,applied,2025-03-01T12:00:00Z\nk,1,EUR,applied,2025-03-01T12:00:00Z\n", "line 3: key \"k\" appears again (first on line 2)"},
		"short row":      {head + "k,1,EUR\n", "wrong number of fields"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := csvprovider.Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
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
