package reconcile_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/storetest"
)

// httpShop serves POST /v1/charges through idemhttp on eng, with the
// intent carrying the body's amount and currency. effect runs as the
// upstream would.
func httpShop(t *testing.T, eng *idem.Engine, effect http.HandlerFunc) http.Handler {
	t.Helper()
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: func(*http.Request) (string, error) { return "shop", nil }, Intent: bodyIntent})
	if err != nil {
		t.Fatal(err)
	}
	return mw.Handler(effect)
}

func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	rw := httptest.NewRecorder()
	h.ServeHTTP(rw, req)
	return rw
}

// TestHTTPRound: charges made over HTTP (idemhttp, the intent carrying the
// amount) whose process dies mid-effect are unknown; reconciliation with a
// Stripe balance export decides them (the applied one succeeded, the one
// the provider never saw failed), and retries through idemhttp replay the
// decision as HTTP responses — never record-unreadable.
func TestHTTPRound(t *testing.T) {
	t.Parallel()
	httpRound(t, nil, "")
}

// TestHTTPRoundEncrypted: the same round with the records encrypted at
// rest: idem reconcile, given the key file, reads the sealed intents and
// seals the results it records; without it, it reads nothing and decides
// nothing.
func TestHTTPRoundEncrypted(t *testing.T) {
	t.Parallel()
	line := "rk1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)) + "\n"
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := idem.LoadKeyring(file)
	if err != nil {
		t.Fatal(err)
	}
	httpRound(t, ring, file)
}

func httpRound(t *testing.T, ring *idem.Keyring, keyFile string) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	crash := &storetest.CrashStore{Store: st}
	clock := storetest.NewClock()
	clock.Advance(-time.Hour) // the crash was an hour ago; idem reconcile runs now
	dying, err := idem.New(crash, idem.Config{Clock: clock.Now, Lease: time.Minute, FinishTimeout: 10 * time.Millisecond, Encryption: ring})
	if err != nil {
		t.Fatal(err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		crash.Crash() // the provider applied the charge; the process dies before the outcome is written
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_lost"}`)
	})
	for _, key := range []string{"o-42", "o-43"} {
		post(httpShop(t, dying, upstream), key, `{"amount":1250,"currency":"eur"}`)
		crash = &storetest.CrashStore{Store: st} // the next process
		dying, _ = idem.New(crash, idem.Config{Clock: clock.Now, Lease: time.Minute, FinishTimeout: 10 * time.Millisecond, Encryption: ring})
	}
	clock.Advance(2 * time.Minute)
	later, err := idem.New(st, idem.Config{Clock: clock.Now, Encryption: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	shop := httpShop(t, later, func(http.ResponseWriter, *http.Request) { t.Error("the charge ran again") })
	for _, key := range []string{"o-42", "o-43"} {
		if rw := post(shop, key, `{"amount":1250,"currency":"eur"}`); rw.Code != http.StatusConflict {
			t.Fatalf("before reconciliation a retry gets %d %s, want 409 outcome-unknown", rw.Code, rw.Body)
		}
	}
	rec, err := st.Get(ctx, "shop", "o-42")
	if err == nil && idem.Sealed(rec.Intent) != (ring != nil) {
		t.Fatalf("intent sealed: %v, want %v", idem.Sealed(rec.Intent), ring != nil)
	}
	if err == nil {
		err = ring.OpenRecord(rec)
	}
	if err != nil || !idemhttp.MadeRecord(rec) {
		t.Fatalf("record %+v, %v: want one made over HTTP", rec, err)
	}
	if in, _ := idem.DecodeIntent(rec.Intent); in.Amount != 1250 || in.Currency != "EUR" || in.Origin != idemhttp.Origin {
		t.Fatalf("intent %+v: want the body's amount and the http origin", in)
	}

	file := filepath.Join(t.TempDir(), "balance.csv")
	csv := "id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,idempotency_key (metadata)\n" +
		"txn_1R9x,charge,ch_1R9xAbCdEf,12.50,0.61,11.89,eur," + clock.Now().Add(-90*time.Second).UTC().Format(time.DateTime) + ",Order 42,o-42\n"
	underCounted := 1
	if ring != nil {
		// And a charge with no local record: reconciliation records it,
		// sealed like every record.
		csv += "txn_2R9x,charge,ch_2R9xAbCdEf,3.00,0.10,2.90,eur," + clock.Now().Add(-80*time.Second).UTC().Format(time.DateTime) + ",Order 99,o-99\n"
		underCounted = 2
	}
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, err := stripeBalance(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := reconcile.Config{SettlementWindow: time.Second, Lookback: 36500 * 24 * time.Hour}
	if ring != nil {
		// Without the keys nothing is readable, so nothing is decided.
		rep, runErr := reconcileOnce(t, st, prov, nil, cfg)
		if rep.Complete() || rep.Counts[reconcile.ClassUnderCounted] != 0 || !strings.Contains(fmt.Sprint(rep.Errors, runErr), "rk1") {
			t.Fatalf("reconcile without the keys: %+v, %v", rep, runErr)
		}
	}
	rep, runErr := reconcileOnce(t, st, prov, ring, cfg)
	if runErr != nil || !rep.Clean() || !rep.Complete() || rep.Counts[reconcile.ClassUnderCounted] != underCounted ||
		rep.Counts[reconcile.ClassNotApplied] != 1 {
		t.Fatalf("reconcile: %+v, %v", rep, runErr)
	}
	if ring != nil {
		orphan, err := st.Get(ctx, "", "o-99")
		if err != nil || !idem.Sealed(orphan.Result) || !idem.Sealed(orphan.Intent) {
			t.Fatalf("the recorded orphan = %+v, %v; want its result and intent sealed", orphan, err)
		}
		if err := ring.OpenRecord(orphan); err != nil || !strings.Contains(string(orphan.Result), "ch_2R9xAbCdEf") {
			t.Fatalf("the orphan opens to %q, %v", orphan.Result, err)
		}
	}

	rw := post(shop, "o-42", `{"amount":1250,"currency":"eur"}`)
	var body reconcile.Resolution
	if rw.Code != http.StatusOK || rw.Header().Get(idemhttp.ReplayedHeader) != "true" || json.Unmarshal(rw.Body.Bytes(), &body) != nil ||
		body.Reference != "ch_1R9xAbCdEf" || body.Amount != 1250 || body.Currency != "EUR" || body.ForwardKey != "o-42" {
		t.Fatalf("retry after reconciliation = %d %v %s; want a replayed 200 naming the provider's charge", rw.Code, rw.Header(), rw.Body)
	}
	rw = post(shop, "o-43", `{"amount":1250,"currency":"eur"}`)
	if rw.Code != http.StatusUnprocessableEntity || rw.Header().Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(rw.Body.String(), reconcile.ProblemNotApplied) {
		t.Fatalf("retry of the charge the provider never saw = %d %s; want the replayed not-applied problem", rw.Code, rw.Body)
	}
	for _, key := range []string{"o-42", "o-43"} {
		rec, err := st.Get(ctx, "shop", key)
		if err != nil {
			t.Fatal(err)
		}
		if idem.Sealed(rec.Result) != (ring != nil) {
			t.Errorf("%s: result sealed: %v, want %v", key, idem.Sealed(rec.Result), ring != nil)
		}
		if err := ring.OpenRecord(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := idemhttp.DecodeResponse(rec.Result); err != nil {
			t.Errorf("%s: result is not a recorded response: %v", key, err)
		}
	}
}
