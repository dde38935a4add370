package listorder_test

import (
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/listorder"
)

func TestCompare(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ordered := []idem.Cursor{
		{CreatedAt: t0, Scope: "a", Key: "z"},
		{CreatedAt: t0, Scope: "b", Key: "a"},
		{CreatedAt: t0, Scope: "b", Key: "b"},
		{CreatedAt: t0.Add(time.Microsecond), Scope: "a", Key: "a"},
	}
	for i, a := range ordered {
		for j, b := range ordered {
			if got, want := listorder.Compare(a, b), compareInts(i, j); got != want {
				t.Errorf("Compare(%v, %v) = %d, want %d", a, b, got, want)
			}
		}
	}
	r := &idem.Record{CreatedAt: t0, Scope: "b", Key: "a"}
	if !listorder.After(r, nil) || !listorder.After(r, &ordered[0]) || listorder.After(r, &ordered[1]) {
		t.Error("After disagrees with Compare")
	}
}

func compareInts(i, j int) int {
	switch {
	case i < j:
		return -1
	case i > j:
		return 1
	}
	return 0
}

func TestPage(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := func() []idem.Record {
		return []idem.Record{
			{CreatedAt: t0.Add(time.Second), Scope: "a", Key: "c"},
			{CreatedAt: t0, Scope: "b", Key: "a"},
			{CreatedAt: t0, Scope: "a", Key: "b"},
		}
	}
	keys := func(rs []idem.Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.Key)
		}
		return out
	}
	if got := keys(listorder.Page(recs(), 0)); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("Page(limit 0) = %v, want all, in order", got)
	}
	if got := keys(listorder.Page(recs(), 2)); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("Page(limit 2) = %v, want the first two", got)
	}
}
