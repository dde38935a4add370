package reconcile_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/csvprovider"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// reconcileOnce runs one reconciliation of st against prov as idem
// reconcile does: an engine with keys and a TTL of ten years (the seeded
// records are old), and cfg.
func reconcileOnce(t *testing.T, st idem.Store, prov reconcile.Provider, keys *idem.Keyring, cfg reconcile.Config) (*reconcile.Report, error) {
	t.Helper()
	eng, err := idem.New(st, idem.Config{TTL: 3650 * 24 * time.Hour, Encryption: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	r, err := reconcile.New(eng, prov, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r.RunOnce(context.Background())
}

// provider opens a settlement file in one of csvprovider's layouts.
func provider(t *testing.T, path, format string) reconcile.Provider {
	t.Helper()
	l, err := csvprovider.Preset(format)
	if err != nil {
		t.Fatal(err)
	}
	p, err := csvprovider.OpenLayout(path, l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stripeBalance opens a Stripe balance export.
func stripeBalance(path string) (reconcile.Provider, error) {
	l, err := csvprovider.Preset(csvprovider.FormatStripeBalance)
	if err != nil {
		return nil, err
	}
	return csvprovider.OpenLayout(path, l)
}

// seedTime is before every row of the settlement files in testdata.
var seedTime = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// bodyIntent is an idemhttp Config.Intent that reads amount and currency
// from a JSON body, as `idem proxy --intent amount=/amount` does.
func bodyIntent(_ *http.Request, body []byte, in *idem.Intent) {
	var b struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	if json.Unmarshal(body, &b) == nil {
		in.Amount, in.Currency = b.Amount, strings.ToUpper(b.Currency)
	}
}

// seedShop writes the local side of the scenario the settlement files in
// testdata settle: engine charges in EUR, JPY, KWD and USD, a refund, an
// unknown charge, a charge the provider has no trace of, and a charge made
// over HTTP whose intent carries its amount.
func seedShop(t *testing.T) idem.Store {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	eng, err := idem.New(st, idem.Config{Clock: func() time.Time { return seedTime }, TTL: 3650 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ok := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte(`{"id":"local"}`), nil }
	for _, c := range []struct {
		op, order string
		amount    int64
		cur       string
		unknown   bool
	}{
		{"charge", "o-1001", 1250, "EUR", false},
		{"charge", "o-1002", 5000, "JPY", false},
		{"charge", "o-1003", 12345, "KWD", false},
		{"charge", "o-1004", 1250, "EUR", false}, // settled as 12.60: drift
		{"refund", "o-1001", 500, "EUR", false},  // settled on a row carrying the charge's key
		{"charge", "o-1005", 2000, "USD", true},  // crashed mid-effect; the provider applied it
		{"charge", "o-1006", 990, "EUR", false},  // the provider has no trace of it
		{"charge", "o-1008", 125000, "EUR", false},
	} {
		fk := string(idem.MustDeriveKey(c.op, 1, "shop", c.order))
		h := idem.Handler(ok)
		if c.unknown {
			h = func(context.Context, *idem.Attempt) ([]byte, error) {
				return nil, idem.Unknown(fmt.Errorf("provider timed out"))
			}
		}
		_, err := eng.DoBytes(ctx, idem.Request{Scope: "shop", Key: idem.Key(c.op + "-" + c.order), Operation: c.op,
			Intent: &idem.Intent{Operation: c.op, Amount: c.amount, Currency: c.cur, ForwardKey: fk}}, h)
		if err != nil && !c.unknown {
			t.Fatal(err)
		}
	}
	// o-1009 through idemhttp: 33.00 EUR intended, settled as 34.00.
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: func(*http.Request) (string, error) { return "shop", nil }, Intent: bodyIntent})
	if err != nil {
		t.Fatal(err)
	}
	srv := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_upstream"}`)
	}))
	req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":3300,"currency":"eur"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"charge:v1:shop:o-1009"`)
	rw := httptest.NewRecorder()
	srv.ServeHTTP(rw, req)
	if rw.Code != http.StatusCreated {
		t.Fatalf("HTTP charge: %d %s", rw.Code, rw.Body)
	}
	return st
}

// summary is the report's content that does not depend on the clock, one
// fact a line, in a stable order.
func summary(t *testing.T, out string) string {
	t.Helper()
	var rep struct {
		Counts      map[string]int   `json:"counts"`
		DriftCount  int              `json:"drift_count"`
		DriftAmount map[string]int64 `json:"drift_amount"`
		Skipped     []struct {
			Reason    string `json:"reason"`
			Rows      int    `json:"rows"`
			Unchecked bool   `json:"unchecked"`
			Lines     []int  `json:"lines"`
		} `json:"skipped_rows"`
		Findings []struct {
			Class, Scope, Key, Detail string
			ForwardKey                string `json:"forward_key"`
			Local                     int64  `json:"local_amount"`
			LocalCur                  string `json:"local_currency"`
			Provider                  int64  `json:"provider_amount"`
			ProviderCur               string `json:"provider_currency"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}
	var lines []string
	for _, c := range reconcile.Classes {
		lines = append(lines, fmt.Sprintf("count %s %d", c, rep.Counts[string(c)]))
	}
	lines = append(lines, fmt.Sprintf("drift_count %d", rep.DriftCount))
	var more []string
	for cur, n := range rep.DriftAmount {
		more = append(more, fmt.Sprintf("drift_amount %s %d", cur, n))
	}
	for _, g := range rep.Skipped {
		more = append(more, fmt.Sprintf("skipped_rows %q %d unchecked=%v lines=%v", g.Reason, g.Rows, g.Unchecked, g.Lines))
	}
	for _, f := range rep.Findings {
		more = append(more, fmt.Sprintf("finding %s %s/%s fk=%s local=%d%s provider=%d%s", f.Class, f.Scope, f.Key,
			f.ForwardKey, f.Local, f.LocalCur, f.Provider, f.ProviderCur))
	}
	sort.Strings(more)
	return strings.Join(append(lines, more...), "\n") + "\n"
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (go test -run %s -update to accept)\n got:\n%s\nwant:\n%s", path, t.Name(), got, want)
	}
}

// TestProviderFormats reconciles the same shop against a Stripe balance
// export and an Adyen settlement details report: the exact classes and
// amounts, the skipped rows by reason, exit 3 for the drift and the
// over-count, and the human reports.
func TestProviderFormats(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"stripe-balance", "adyen-settlement"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			st := seedShop(t)
			prov := provider(t, filepath.Join("testdata", format+".csv"), format)
			cfg := reconcile.Config{SettlementWindow: time.Hour, Lookback: 36500 * 24 * time.Hour, OrphanScope: "shop"}
			rep, err := reconcileOnce(t, st, prov, nil, cfg)
			if err != nil || rep.Clean() {
				t.Fatalf("%+v, %v; want drift", rep, err)
			}
			out, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, format+".golden", summary(t, string(out)))

			var html strings.Builder
			if err := reconcile.WriteHTML(&html, rep); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"<td>drift</td><td class=\"num\">2</td>", "<td>EUR</td><td class=\"num\">1.10 EUR</td>",
				"<td>no key</td><td class=\"num\">1</td>", "FOUND 2 drift, 1 over-counted", "Oldest unreconciled record:"} {
				if !strings.Contains(html.String(), want) {
					t.Errorf("HTML report lacks %q:\n%s", want, html.String())
				}
			}

			// The unknown engine charge was recorded from the provider in
			// a form its own retries decode.
			ctx := context.Background()
			eng, err := idem.New(st, idem.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			type charge struct {
				Amount    int64  `json:"amount"`
				Currency  string `json:"currency"`
				Reference string `json:"reference"`
			}
			c, res, err := idem.Do(ctx, eng, idem.Request{Scope: "shop", Key: "charge-o-1005", Operation: "charge"},
				func(context.Context, *idem.Attempt) (charge, error) {
					t.Fatal("the effect ran again")
					return charge{}, nil
				})
			if err != nil || !res.Replayed || c.Amount != 2000 || c.Currency != "USD" || c.Reference == "" {
				t.Fatalf("retry of the reconciled charge = %+v, %+v, %v", c, res, err)
			}

			// A second run writes nothing new and still pages; as CSV.
			rep, err = reconcileOnce(t, st, prov, nil, cfg)
			var csvRep strings.Builder
			if err == nil {
				err = reconcile.WriteCSV(&csvRep, rep)
			}
			if err != nil || rep.Clean() || !strings.Contains(csvRep.String(), "class,drift,2") ||
				!strings.Contains(csvRep.String(), "drift_amount,EUR,1.10 EUR") {
				t.Fatalf("second run: %v\n%s", err, csvRep.String())
			}
		})
	}
}
