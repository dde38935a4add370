package reconcile_test

import (
	"bytes"
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
)

var update = flag.Bool("update", false, "rewrite the golden files")

// unclosed hands the command a store it may close without emptying it.
type unclosed struct{ idem.Store }

func (unclosed) Close() error { return nil }

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
		Skipped     map[string]int   `json:"skipped_rows"`
		Findings    []struct {
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
	for r, n := range rep.Skipped {
		more = append(more, fmt.Sprintf("skipped_rows %q %d", r, n))
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
			dir := t.TempDir()
			run := func(extra ...string) (int, string, string) {
				args := append([]string{"--store", "mem", "--provider-csv", filepath.Join("testdata", format+".csv"),
					"--provider-format", format, "--settlement-window", "1h", "--lookback", "36500d",
					"--orphan-scope", "shop", "--ttl", "3650d"}, extra...)
				var out, errb bytes.Buffer
				code := reconcile.RunReconcileCommand(context.Background(), args, &out, &errb,
					func(context.Context, string) (idem.Store, error) { return unclosed{st}, nil })
				return code, out.String(), errb.String()
			}
			code, out, errs := run("--json", "--report", filepath.Join(dir, "report.html"))
			if code != reconcile.ExitFound {
				t.Fatalf("exit %d, want 3 (drift)\n%s\n%s", code, out, errs)
			}
			golden(t, format+".golden", summary(t, out))

			html, err := os.ReadFile(filepath.Join(dir, "report.html"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"<td>drift</td><td class=\"num\">2</td>", "<td>EUR</td><td class=\"num\">110</td>",
				"<td>no key</td><td class=\"num\">1</td>", "FOUND 2 drift, 1 over-counted", "Oldest unreconciled record:"} {
				if !strings.Contains(string(html), want) {
					t.Errorf("HTML report lacks %q:\n%s", want, html)
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
			code, _, errs = run("--report", filepath.Join(dir, "report.csv"))
			csvRep, _ := os.ReadFile(filepath.Join(dir, "report.csv"))
			if code != reconcile.ExitFound || !strings.Contains(string(csvRep), "class,drift,2") ||
				!strings.Contains(string(csvRep), "drift_amount,EUR,110") {
				t.Fatalf("second run: exit %d\n%s\n%s", code, csvRep, errs)
			}
		})
	}
}
