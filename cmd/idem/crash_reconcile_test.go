package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyKill9Reconcile is the round a proxy user goes through: the proxy
// is killed while the upstream applies a charge, the record is unknown,
// idem reconcile reads the provider's Stripe balance export and records the
// charge succeeded, and the client's retry through the restarted proxy
// replays a 200 naming the provider's charge — not 500 record-unreadable.
func TestProxyKill9Reconcile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	up, p2 := killMidEffect(t, db, "/v1/charges", `"charge:v1:shop:o-42"`, `{"amount":1250,"currency":"eur"}`, "")

	file := filepath.Join(dir, "balance_transactions.csv")
	if err := os.WriteFile(file, []byte("id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,idempotency_key (metadata)\n"+
		"txn_1R9x,charge,ch_1R9xAbCdEf,12.50,0.61,11.89,eur,"+time.Now().UTC().Format(time.DateTime)+",Order 42,charge:v1:shop:o-42\n"+
		"txn_1R9y,payout,po_1R9y,-11.89,0.00,-11.89,eur,"+time.Now().UTC().Format(time.DateTime)+",STRIPE PAYOUT,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "reconcile", "--store", db, "--provider-csv", file, "--provider-format", "stripe-balance", "--settlement-window", "1h")
	if code != 0 || !has(out, "under_counted 1") || !has(out, "type payout 1") {
		t.Fatalf("idem reconcile: code %d\n%s%s", code, out, errOut)
	}
	r := send(t, "POST", p2.url("/v1/charges"), `"charge:v1:shop:o-42"`, `{"amount":1250,"currency":"eur"}`)
	var body struct {
		Object    string `json:"object"`
		Reference string `json:"reference"`
		Amount    int64  `json:"amount"`
	}
	if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" || json.Unmarshal([]byte(r.body), &body) != nil ||
		body.Object != "idem.resolution" || body.Reference != "ch_1R9xAbCdEf" || body.Amount != 1250 {
		t.Fatalf("retry after reconciliation: %d %v %s; want a replayed 200 naming the provider's charge", r.status, r.header, r.body)
	}
	if n := up.count("/v1/charges"); n != 1 {
		t.Fatalf("upstream saw %d charges, want exactly 1", n)
	}
	out, errOut, code = cli(t, "get", "charge:v1:shop:o-42", "--store", db)
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, "response:") || !strings.Contains(out, "mark:") {
		t.Fatalf("idem get after reconciliation: code %d\n%s%s", code, out, errOut)
	}
}

// has reports whether out contains want, runs of spaces compared as one.
func has(out, want string) bool {
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return strings.Contains(squash(out), squash(want))
}
