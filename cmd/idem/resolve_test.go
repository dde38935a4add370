package main

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/idemkit/idem/storetest"
)

// unknownRecords makes, in a new SQLite file, an unknown record of each
// origin: "eng-1" by an application through the engine, "http-1" through
// idemhttp whose process died mid-effect. It returns the file's path.
func unknownRecords(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, eng := openSQLiteEngine(t, path)
	_, err := eng.DoBytes(ctx, idem.Request{Key: "eng-1", Intent: &idem.Intent{Operation: "charge", Amount: 1250, Currency: "EUR"}},
		func(context.Context, *idem.Attempt) ([]byte, error) {
			return nil, idem.Unknown(errors.New("provider timed out"))
		})
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("engine record: %v", err)
	}
	crash := &storetest.CrashStore{Store: st}
	clock := storetest.NewClock()
	clock.Advance(-time.Hour)
	dying, err := idem.New(crash, idem.Config{Clock: clock.Now, Lease: time.Minute, FinishTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	mw, err := idemhttp.New(dying, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		crash.Crash()
		w.WriteHeader(http.StatusCreated)
	})).ServeHTTP(httptest.NewRecorder(), httpCharge("http-1"))
	return path
}

func httpCharge(key string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":1250}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	return req
}

// TestResolveFitsTheRecord: idem resolve stores what whatever made the
// record decodes — a response for the record made over HTTP, the value for
// the engine's — so retries of both replay, and idem get shows each.
func TestResolveFitsTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := unknownRecords(t)
	dsn := "sqlite://" + path
	body := filepath.Join(t.TempDir(), "value.json")
	if err := os.WriteFile(body, []byte(`{"id":"ch_manual","amount":1250}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, e, code := runCLI("resolve", "eng-1", "--store", dsn, "--as", "succeeded", "--reason", "seen in the dashboard", "--status", "201", "--body", body); code != exitFailure || !strings.Contains(e, "not over HTTP") {
		t.Fatalf("--status on an engine record: code %d, stderr %q", code, e)
	}
	if _, e, code := runCLI("resolve", "http-1", "--store", dsn, "--as", "succeeded", "--reason", "x", "--if-fence", "7", "--body", body); code != exitFailure || !strings.Contains(e, "moved on from fence 7") {
		t.Fatalf("stale --if-fence: code %d, stderr %q", code, e)
	}
	for _, key := range []string{"eng-1", "http-1"} {
		if _, e, code := runCLI("resolve", key, "--store", dsn, "--as", "succeeded", "--reason", "seen in the dashboard", "--if-fence", "1", "--body", body); code != exitOK {
			t.Fatalf("resolve %s: code %d, stderr %q", key, code, e)
		}
	}
	o, _, _ := runCLI("get", "eng-1", "--store", dsn)
	if !strings.Contains(o, `value:`) || !strings.Contains(o, `{"id":"ch_manual","amount":1250}`) {
		t.Errorf("idem get eng-1:\n%s", o)
	}
	o, _, _ = runCLI("get", "http-1", "--store", dsn)
	if !strings.Contains(o, "response:") || !strings.Contains(o, "200, 32 body bytes") {
		t.Errorf("idem get http-1:\n%s", o)
	}

	_, eng := openSQLiteEngine(t, path)
	type charge struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	c, res, err := idem.Do(ctx, eng, idem.Request{Key: "eng-1"}, func(context.Context, *idem.Attempt) (charge, error) {
		t.Error("the engine charge ran again")
		return charge{}, nil
	})
	if err != nil || !res.Replayed || c.ID != "ch_manual" {
		t.Fatalf("engine retry = %+v, %+v, %v", c, res, err)
	}
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope})
	if err != nil {
		t.Fatal(err)
	}
	rw := httptest.NewRecorder()
	mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the HTTP charge ran again") })).ServeHTTP(rw, httpCharge("http-1"))
	var got charge
	if rw.Code != http.StatusOK || rw.Header().Get("Content-Type") != "application/json" || json.Unmarshal(rw.Body.Bytes(), &got) != nil || got.ID != "ch_manual" {
		b, _ := io.ReadAll(rw.Body)
		t.Fatalf("HTTP retry = %d %v %s", rw.Code, rw.Header(), b)
	}
}
