package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/sqlitestore"
)

// seedRecord records result as the succeeded outcome of key (global scope)
// in a new SQLite file and returns its DSN.
func seedRecord(t *testing.T, key string, result []byte) string {
	t.Helper()
	return seedSQLite(t, result, idem.Request{Key: idem.Key(key)})
}

// seedSQLite runs each request once in a new SQLite file, its effect
// returning result, and returns the file's DSN.
func seedSQLite(t *testing.T, result []byte, reqs ...idem.Request) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	_, eng := openSQLiteEngine(t, path)
	for _, req := range reqs {
		if _, err := eng.DoBytes(ctx, req,
			func(context.Context, *idem.Attempt) ([]byte, error) { return result, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite://" + path
}

// openSQLiteEngine opens (creating) the SQLite file at path and an engine
// on it, both closed when the test ends.
func openSQLiteEngine(t *testing.T, path string) (idem.Store, *idem.Engine) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path, sqlitestore.Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); st.Close() })
	return st, eng
}

func TestResolveRefusalNamesStateAndForce(t *testing.T) {
	t.Parallel()
	dsn := seedRecord(t, "paid-1", nil)
	_, e, code := runCLI("resolve", "paid-1", "--store", dsn, "--as", "released", "--reason", "x")
	if code != exitFailure {
		t.Fatalf("code %d, want 1; stderr %q", code, e)
	}
	want := `idem resolve: record "paid-1" is succeeded, not unknown; --force changes a decided record`
	if strings.TrimSpace(e) != want {
		t.Fatalf("stderr %q\nwant   %q", e, want)
	}
	if _, e, code := runCLI("resolve", "paid-1", "--store", dsn, "--as", "released", "--reason", "x", "--force"); code != exitOK {
		t.Fatalf("with --force: code %d, stderr %q", code, e)
	}
}

func TestGetShowsWhyAResultIsUnreadable(t *testing.T) {
	t.Parallel()
	// A record made over HTTP whose result is not a recorded response.
	dsn := seedSQLite(t, []byte("abc"), idem.Request{Key: "odd-1", Intent: &idem.Intent{Origin: idemhttp.Origin}})
	o, e, code := runCLI("get", "odd-1", "--store", dsn)
	if code != exitOK {
		t.Fatalf("code %d, stderr %q", code, e)
	}
	_, decodeErr := idemhttp.DecodeResponse([]byte("abc"))
	if decodeErr == nil || !strings.Contains(o, "3 bytes") || !strings.Contains(o, decodeErr.Error()) {
		t.Fatalf("idem get does not say why the result is unreadable (%v):\n%s", decodeErr, o)
	}
}

func TestRecordJSONStateIsAStoreState(t *testing.T) {
	t.Parallel()
	now := time.Now()
	rec := &idem.Record{Key: "k", State: idem.StateInProgress, Fence: 1, CreatedAt: now.Add(-time.Minute),
		LeaseUntil: now.Add(-time.Second)}
	var buf bytes.Buffer
	if code := writeJSON(nil, &buf, toJSON(rec, now)); code != exitOK {
		t.Fatal(code)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["state"] != "unknown" || got["stored_state"] != "in_progress" || got["lease_expired"] != true {
		t.Fatalf("expired lease: state %v, stored_state %v, lease_expired %v; want unknown, in_progress, true",
			got["state"], got["stored_state"], got["lease_expired"])
	}
	rec.LeaseUntil = now.Add(time.Minute)
	j := toJSON(rec, now)
	if j.State != "in_progress" || j.LeaseExpired {
		t.Fatalf("live lease: state %q, lease_expired %v", j.State, j.LeaseExpired)
	}
	// The table keeps saying it in words.
	if s := effState(&idem.Record{State: idem.StateInProgress, LeaseUntil: now.Add(-time.Second)}, now); s != "unknown (lease expired)" {
		t.Fatalf("table state %q", s)
	}
}

// TestSweepPrintsProgress: a sweep of more than one batch prints how many
// records it has deleted so far on stderr (here from the first batch on;
// by default once it has run two seconds), and the total on stdout.
func TestSweepPrintsProgress(t *testing.T) {
	defer func(d time.Duration) { sweepProgressAfter = d }(sweepProgressAfter)
	sweepProgressAfter = 0
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Migrate: true, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Microsecond)
	const n = 1001 // one more than a batch
	for i := range n {
		k := fmt.Sprint("old-", i)
		c, err := st.Claim(ctx, idem.ClaimParams{Key: k, AttemptID: "a", Now: past, LeaseUntil: past.Add(time.Minute)})
		if err == nil {
			_, err = st.Finish(ctx, idem.FinishParams{Key: k, Fence: c.Record.Fence, AttemptID: "a", State: idem.StateSucceeded,
				Result: []byte("ok"), CompletedAt: past, ExpiresAt: past.Add(time.Hour)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// --rate paces the batches: 1001 records at 2000/s take at least the
	// half second the first batch buys (a lower bound only).
	start := time.Now()
	out, errs, code := runCLI("sweep", "--store", "sqlite://"+path, "--rate", "2000")
	if code != 0 || !strings.Contains(out, "deleted 1001 expired records") || !strings.Contains(errs, "idem sweep: 1000 records deleted") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("--rate 2000 swept 1001 records in %s, want at least 500ms", took)
	}
	for _, bad := range []string{"-1", "fast", "NaN"} {
		if _, errs, code := runCLI("sweep", "--store", "sqlite://"+path, "--rate", bad); code != 2 || !strings.Contains(errs, "Run 'idem sweep --help' for usage.") {
			t.Fatalf("--rate %s: exit %d, stderr %q; want a usage error", bad, code, errs)
		}
	}
}

// TestGetShowsIntentAndResponse: idem get shows what an operator needs to
// decide a record — the intent written with the claim and the response a
// retry replays — for a middleware (or proxy: the same format) record and
// an engine record, as text and as decoded JSON, and --body-out writes the
// body.
func TestGetShowsIntentAndResponse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/charges/ch_1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1","amount":5000}`))
	}))
	req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":5000}`))
	req.Header.Set("Idempotency-Key", `"order-42"`)
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if _, err := eng.DoBytes(ctx, idem.Request{Key: "refund-7", Intent: &idem.Intent{Operation: "refund", Amount: 1250, Currency: "EUR"}},
		func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("re_9"), nil }); err != nil {
		t.Fatal(err)
	}
	_ = eng.Close()
	_ = st.Close()
	dsn := "sqlite://" + path

	o, e, code := runCLI("get", `"order-42"`, "--store", dsn)
	if code != exitOK {
		t.Fatalf("get order-42: code %d, stderr %q", code, e)
	}
	for _, want := range []string{`operation:\s+POST\n`, `response:\s+201, 27 body bytes\n`, `Location:\s+/charges/ch_1\n`, `\n\{"id":"ch_1","amount":5000\}\n`} {
		if !regexp.MustCompile(want).MatchString(o) {
			t.Errorf("get order-42 lacks %s:\n%s", want, o)
		}
	}
	o, _, _ = runCLI("get", "refund-7", "--store", dsn)
	for _, want := range []string{`operation:\s+refund\n`, `amount:\s+12.50 EUR\n`, `value:\s+4 bytes: re_9\n`} {
		if !regexp.MustCompile(want).MatchString(o) {
			t.Errorf("get refund-7 lacks %s:\n%s", want, o)
		}
	}
	out := filepath.Join(t.TempDir(), "body")
	o, _, code = runCLI("get", "order-42", "--store", dsn, "--json", "--body-out", out)
	var j struct {
		Intent   map[string]any `json:"intent"`
		Response struct {
			Status int                 `json:"status"`
			Header map[string][]string `json:"header"`
			Body   string              `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(o), &j); err != nil || code != exitOK {
		t.Fatalf("--json: code %d, %v:\n%s", code, err, o)
	}
	if j.Response.Status != 201 || j.Response.Body != `{"id":"ch_1","amount":5000}` || j.Response.Header["Location"][0] != "/charges/ch_1" || j.Intent["operation"] != "POST" {
		t.Errorf("--json = %+v; want the decoded response and intent", j)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != `{"id":"ch_1","amount":5000}` {
		t.Errorf("--body-out wrote %q, %v", b, err)
	}
}

// TestListAndGetPrintMoney: idem list and idem get print an intent's
// amount as money, by the currency's ISO 4217 digits, and label minor
// units when the intent names no currency.
func TestListAndGetPrintMoney(t *testing.T) {
	t.Parallel()
	dsn := seedSQLite(t, []byte("ok"),
		idem.Request{Scope: "shop", Key: "eur", Intent: &idem.Intent{Operation: "charge", Amount: 125000, Currency: "EUR"}},
		idem.Request{Scope: "shop", Key: "kwd", Intent: &idem.Intent{Operation: "charge", Amount: 12345, Currency: "KWD"}},
		idem.Request{Scope: "shop", Key: "raw", Intent: &idem.Intent{Operation: "charge", Amount: 990}})
	o, e, code := runCLI("list", "--store", dsn)
	if code != exitOK {
		t.Fatalf("list: code %d, %s", code, e)
	}
	for _, want := range []string{"1250.00 EUR", "12.345 KWD", "990 (minor units)"} {
		if !strings.Contains(o, want) {
			t.Errorf("idem list lacks %q:\n%s", want, o)
		}
	}
	if o, _, _ = runCLI("get", "eur", "--scope", "shop", "--store", dsn); !regexp.MustCompile(`amount:\s+1250.00 EUR\n`).MatchString(o) {
		t.Errorf("idem get lacks the amount as money:\n%s", o)
	}
}
