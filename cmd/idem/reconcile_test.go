package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// TestReconcileCommand runs `idem reconcile` through the CLI on a real
// SQLite file: a clean settlement file exits 0, a planted drift exits 3 and
// is printed. (Every class and flag is tested in package reconcile.)
func TestReconcileCommand(t *testing.T) {
	ctx := context.Background()
	csv := func(amount2 int) string {
		at := time.Now().UTC().Format(time.RFC3339)
		body := "key,amount,currency,status,applied_at\n" +
			fmt.Sprintf("charge:v1:order-1,100,EUR,applied,%s\ncharge:v1:order-2,%d,EUR,applied,%s\ncharge:v1:order-3,300,EUR,applied,%s\n", at, amount2, at, at)
		p := filepath.Join(t.TempDir(), "settlement.csv")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out, errb strings.Builder
	if code := run(ctx, []string{"reconcile", "--store", seedCharges(t), "--provider-csv", csv(200)}, &out, &errb); code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	code := run(ctx, []string{"reconcile", "--store", seedCharges(t), "--provider-csv", csv(250)}, &out, &errb)
	if code != 3 || !strings.Contains(out.String(), "drift") {
		t.Fatalf("planted drift: exit %d, want 3\n%s%s", code, out.String(), errb.String())
	}
}

// TestReconcileUnusableStore: a DSN reconcile cannot use is a usage error
// (exit 2), memory:// included: a fresh memory store would report clean
// without having looked at a record.
func TestReconcileUnusableStore(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "s.csv")
	if err := os.WriteFile(csv, []byte("key,amount,currency,status,applied_at\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{"memory://", "foo://x", "no-scheme"} {
		var out, errb strings.Builder
		code := run(context.Background(), []string{"reconcile", "--store", dsn, "--provider-csv", csv}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "--store") {
			t.Errorf("--store %s: exit %d, want 2\n%s%s", dsn, code, out.String(), errb.String())
		}
	}
}

// seedCharges records three succeeded charges of 100, 200 and 300 EUR in a
// new SQLite file and returns its DSN.
func seedCharges(t *testing.T) string {
	t.Helper()
	var reqs []idem.Request
	for i := 1; i <= 3; i++ {
		reqs = append(reqs, idem.Request{Scope: "shop", Key: idem.Key(fmt.Sprintf("order-%d", i)),
			Intent: &idem.Intent{Operation: "charge", Amount: int64(100 * i), Currency: "EUR", ForwardKey: fmt.Sprintf("charge:v1:order-%d", i)}})
	}
	return seedSQLite(t, []byte("ok"), reqs...)
}
