package ui

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// make puts a record in the fixture's store: state, creation at t0+at, an
// HTTP intent with path, operation, amount and currency.
func (f *fixture) make(scope, key string, state idem.State, at time.Duration, path, op string, amount int64, cur string) {
	f.t.Helper()
	ctx := context.Background()
	in, _ := json.Marshal(idem.Intent{Operation: op, Amount: amount, Currency: cur, Origin: "http",
		Fields: map[string]string{"method": "POST", "path": path}})
	now := t0.Add(at)
	lease := now.Add(time.Second)
	if state == idem.StateInProgress {
		lease = time.Now().Add(time.Hour) // a live lease
	}
	cr, err := f.st.Claim(ctx, idem.ClaimParams{Scope: scope, Key: key, AttemptID: "a-" + key, Intent: in, Now: now, LeaseUntil: lease})
	if err != nil || !cr.Claimed {
		f.t.Fatalf("claim %s: %v", key, err)
	}
	if state == idem.StateInProgress {
		return
	}
	p := idem.FinishParams{Scope: scope, Key: key, Fence: cr.Record.Fence, AttemptID: cr.Record.AttemptID, State: state,
		CompletedAt: now.Add(time.Second)}
	if state.Terminal() {
		p.Result, p.ExpiresAt = []byte(`x`), time.Now().Add(time.Hour)
	}
	if _, err := f.st.Finish(ctx, p); err != nil {
		f.t.Fatal(err)
	}
}

func keysOf(p *SearchPage) []string {
	var out []string
	for _, r := range p.Records {
		out = append(out, r.Scope+"/"+r.Key)
	}
	return out
}

// searchFixture holds records that differ in one filtered field each.
func searchFixture(t *testing.T) *fixture {
	f := consoleFixture(t, Config{})
	f.make("", "charge:o-1", idem.StateUnknown, 1*time.Minute, "/v1/charges", "charge", 1250, "EUR")
	f.make("shop-b", "charge:o-1", idem.StateSucceeded, 2*time.Minute, "/v1/charges", "charge", 999, "EUR")
	f.make("", "charge:o-2", idem.StateFailed, 3*time.Minute, "/v1/charges", "charge", 5000, "JPY")
	f.make("", "refund:o-1", idem.StateUnknown, 4*time.Minute, "/v1/refunds", "refund", 2500, "EUR")
	f.make("shop-b", "charge:o-3", idem.StateInProgress, 5*time.Minute, "/v1/charges/capture", "capture", 100000, "EUR")
	f.make("", "charge:o-4", idem.StateSucceeded, 90*time.Minute, "/v2/charges", "charge", 1250, "KWD")
	return f
}

// Search: key (exact and prefix), scope, state, age, route, operation and
// amount each keep exactly the records they name.
func TestSearchFilters(t *testing.T) {
	t.Parallel()
	f := searchFixture(t)
	ctx, now := context.Background(), time.Now()
	all := []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-2", "/refund:o-1", "shop-b/charge:o-3", "/charge:o-4"}
	for _, c := range []struct {
		name string
		q    Query
		want []string
	}{
		{"all", Query{}, all},
		{"key exact, any scope", Query{Key: "charge:o-1"}, []string{"/charge:o-1", "shop-b/charge:o-1"}},
		{"key exact in a scope", Query{Key: "charge:o-1", Scope: "shop-b"}, []string{"shop-b/charge:o-1"}},
		{"key exact, no such", Query{Key: "charge:o"}, nil},
		{"key prefix", Query{Key: "charge:o-", KeyPrefix: true}, []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-2", "shop-b/charge:o-3", "/charge:o-4"}},
		{"scope", Query{Scope: "shop-b"}, []string{"shop-b/charge:o-1", "shop-b/charge:o-3"}},
		{"state unknown", Query{States: []idem.State{idem.StateUnknown}}, []string{"/charge:o-1", "/refund:o-1"}},
		{"states succeeded+failed", Query{States: []idem.State{idem.StateSucceeded, idem.StateFailed}}, []string{"shop-b/charge:o-1", "/charge:o-2", "/charge:o-4"}},
		{"state in_progress", Query{States: []idem.State{idem.StateInProgress}}, []string{"shop-b/charge:o-3"}},
		{"older than 1h", Query{OlderThan: now.Sub(t0.Add(time.Hour))}, []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-2", "/refund:o-1", "shop-b/charge:o-3"}},
		{"newer than 1h", Query{NewerThan: now.Sub(t0.Add(time.Hour))}, []string{"/charge:o-4"}},
		{"route prefix", Query{Route: "/v1/charges"}, []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-2", "shop-b/charge:o-3"}},
		{"route exact sub-path", Query{Route: "/v1/charges/capture"}, []string{"shop-b/charge:o-3"}},
		{"operation", Query{Operation: "REFUND"}, []string{"/refund:o-1"}},
		{"operation by method", Query{Operation: "post"}, all},
		{"amount from 12.50", Query{MinAmount: "12.50"}, []string{"/charge:o-1", "/charge:o-2", "/refund:o-1", "shop-b/charge:o-3"}},
		{"amount to 12.50", Query{MaxAmount: "12.50"}, []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-4"}},
		{"amount 13 to 999.99", Query{MinAmount: "13", MaxAmount: "999.99"}, []string{"/refund:o-1"}},
		{"amount 13 to 5000", Query{MinAmount: "13", MaxAmount: "5000"}, []string{"/charge:o-2", "/refund:o-1", "shop-b/charge:o-3"}},
		{"amount 1.25 exactly (KWD: 3 digits)", Query{MinAmount: "1.25", MaxAmount: "1.250"}, []string{"/charge:o-4"}},
		{"combined", Query{Key: "charge:", KeyPrefix: true, States: []idem.State{idem.StateUnknown}, Route: "/v1/", MinAmount: "10"}, []string{"/charge:o-1"}},
	} {
		p, err := Search(ctx, f.st, c.q, 50, now)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := keysOf(p); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := Search(ctx, f.st, Query{MinAmount: "ten"}, 50, now); err == nil {
		t.Fatal("an amount that is not a number was accepted")
	}
}

// Paging walks every match once, in order, by cursor; a search whose
// filters leave out most records stops at the scan bound and continues.
func TestSearchPaging(t *testing.T) {
	t.Parallel()
	f := searchFixture(t)
	ctx, now := context.Background(), time.Now()
	var got []string
	q := Query{Key: "charge:", KeyPrefix: true}
	for pages := 0; ; pages++ {
		p, err := Search(ctx, f.st, q, 2, now)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, keysOf(p)...)
		if p.Next == nil {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		q.After = p.Next
	}
	want := []string{"/charge:o-1", "shop-b/charge:o-1", "/charge:o-2", "shop-b/charge:o-3", "/charge:o-4"}
	if !slices.Equal(got, want) {
		t.Fatalf("pages of 2 gave %q, want %q", got, want)
	}
}

// The search page: the form's fields become the query, the page says which
// filters the store applied, and its next link keeps them.
func TestSearchPage(t *testing.T) {
	t.Parallel()
	f := searchFixture(t)
	f.s.cfg.PageSize = 1
	f.login("alice")
	v := url.Values{"key": {"charge:o-"}, "match": {"prefix"}, "state": {"succeeded", "failed"}, "route": {"/v"}}
	_, body := f.get("/records?" + v.Encode())
	if !strings.Contains(body, ">charge:o-1</a>") || strings.Contains(body, ">charge:o-2</a>") {
		t.Fatalf("first page of 1:\n%s", body)
	}
	if !strings.Contains(body, "The store applied: state.") || !strings.Contains(body, "Checked while reading: key, route.") {
		t.Fatalf("the page does not say which filters the store applied:\n%s", body)
	}
	m := nextLinkR.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no next page link:\n%s", body)
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	_, body = f.get(next)
	if !strings.Contains(body, ">charge:o-2</a>") || strings.Contains(body, ">charge:o-1</a>") {
		t.Fatalf("second page (%s):\n%s", next, body)
	}
	if _, body = f.get("/records?state=bogus&min=abc"); !strings.Contains(body, `state &#34;bogus&#34;`) || !strings.Contains(body, "minimum amount") {
		t.Fatalf("bad filters are not explained:\n%s", body)
	}
}
