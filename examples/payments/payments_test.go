package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/cardprovider"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/sqlitestore"
)

// client is a payments client that retries like a real one: on transport
// errors, 409 and 503, with the same Idempotency-Key.
type client struct {
	t    *testing.T
	base string
}

// post sends one request and returns the status and body (status 0 for a
// transport error).
func (c client) post(op, key string, amount int64) (int, []byte) {
	c.t.Helper()
	body := fmt.Sprintf(`{"order_id":"o-%s","amount":%d,"currency":"EUR"}`, key, amount)
	req, _ := http.NewRequest(http.MethodPost, c.base+"/"+op+"s", bytes.NewReader([]byte(body)))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// retry sends the request up to n times until it gets a final answer.
func (c client) retry(op, key string, amount int64, n int) (int, []byte) {
	c.t.Helper()
	var code int
	var body []byte
	for range n {
		code, body = c.post(op, key, amount)
		if code != 0 && code != http.StatusConflict && code != http.StatusServiceUnavailable {
			break
		}
	}
	return code, body
}

func newSQLite(t *testing.T) idem.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "pay.db"), sqlitestore.Config{
		Synchronous: "NORMAL", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestPaymentsSQLite(t *testing.T) { runPayments(t, newSQLite(t)) }

// runPayments drives the service through retries and injected provider
// faults and checks: no double charge, every lost answer ends unknown and is
// then resolved by recovery or reconciliation, and a clean final report.
func runPayments(t *testing.T, st idem.Store) {
	ctx := context.Background()
	prov := cardprovider.New()
	psrv := httptest.NewServer(prov.Handler())
	t.Cleanup(psrv.Close)
	a, err := newApp(st, appConfig{Provider: psrv.URL, Lease: 30 * time.Second, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.handler())
	t.Cleanup(srv.Close)
	c := client{t: t, base: srv.URL}
	state := func(op, key string) idem.State {
		k, _ := idem.DeriveKey(op, 1, key)
		r, err := st.Get(ctx, "demo", string(k))
		if err != nil {
			t.Fatalf("record %s %s: %v", op, key, err)
		}
		return r.State
	}

	// Healthy provider; every request retried three times.
	for i := range 5 {
		key := fmt.Sprintf("c-%d", i)
		for try := range 3 {
			if code, body := c.post("charge", key, 1000+int64(i)); code != http.StatusCreated {
				t.Fatalf("%s try %d: %d %s", key, try, code, body)
			}
		}
	}

	// Lost answers: the provider applies, then drops the connection.
	prov.DropResponses(2)
	lost := []string{"lost-1", "lost-2"}
	for _, key := range lost {
		if code, _ := c.retry("charge", key, 500, 4); code != http.StatusServiceUnavailable {
			t.Fatalf("%s after a lost answer: %d, want 503 while unknown", key, code)
		}
		if s := state("charge", key); s != idem.StateUnknown {
			t.Fatalf("%s: %s, want unknown", key, s)
		}
	}
	// A provider that ignores idempotency keys, and loses the answer too:
	// the retries above must not have called it again either.
	prov.SetIdempotent(false)
	prov.DropResponses(1)
	if code, _ := c.retry("charge", "noidem", 700, 4); code != http.StatusServiceUnavailable {
		t.Fatalf("noidem: %d", code)
	}
	lost = append(lost, "noidem")
	counts, err := a.rec.RunOnce(ctx)
	if err != nil || counts[reconcile.DecidedApplied] != 3 {
		t.Fatalf("recovery: %v, %v", counts, err)
	}
	prov.SetIdempotent(true)

	// A slow provider: the call times out, the provider applies later; the
	// reconciler, not the hook, resolves it this time.
	prov.SetDelay(time.Second)
	if code, _ := c.post("charge", "slow", 900); code != http.StatusServiceUnavailable {
		t.Fatalf("slow: %d", code)
	}
	prov.Wait()
	prov.SetDelay(0)
	if s := state("charge", "slow"); s != idem.StateUnknown {
		t.Fatalf("slow: %s, want unknown", s)
	}
	rep, err := a.reco.RunOnce(ctx)
	if err != nil || len(rep.Keys[reconcile.ClassUnderCounted]) != 1 {
		t.Fatalf("reconcile after the slow charge: %+v, %v", rep, err)
	}
	lost = append(lost, "slow")

	// Every lost answer now replays the provider's entry.
	for _, key := range lost {
		code, body := c.retry("charge", key, map[string]int64{"lost-1": 500, "lost-2": 500, "noidem": 700, "slow": 900}[key], 2)
		var e cardprovider.Entry
		if code != http.StatusCreated || json.Unmarshal(body, &e) != nil || e.Status != "applied" {
			t.Fatalf("%s after resolution: %d %s", key, code, body)
		}
		if s := state("charge", key); s != idem.StateSucceeded {
			t.Fatalf("%s: %s", key, s)
		}
	}

	// A refund sent with a charge's client key is another intent, and the
	// provider sees another key; a changed amount under a used key is 422.
	if code, body := c.retry("refund", "c-1", 1001, 3); code != http.StatusCreated {
		t.Fatalf("refund: %d %s", code, body)
	}
	if code, _ := c.post("charge", "c-1", 1); code != http.StatusUnprocessableEntity {
		t.Fatalf("reused key, other amount: %d", code)
	}

	// Zero double charges: one request and one application per forwarded key.
	apps := prov.Applications()
	if len(apps) != 5+len(lost)+1 {
		t.Fatalf("provider applied %d keys, want %d: %v", len(apps), 5+len(lost)+1, apps)
	}
	for k, n := range apps {
		if n != 1 || prov.Calls(k) != 1 {
			t.Errorf("key %s: applied %d times, called %d times", k, n, prov.Calls(k))
		}
	}
	rep, err = a.reco.RunOnce(ctx)
	if err != nil || !rep.Clean() || rep.Counts[reconcile.ClassPending] != 0 || len(rep.Errors) != 0 ||
		rep.Counts[reconcile.ClassUnderCounted] != 0 {
		t.Fatalf("final report not clean: %+v, %v", rep, err)
	}
}

func TestPaymentsPostgres(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	runPayments(t, st)
}
