package httpprovider

import (
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reconcile"
)

// FuzzDecodeLookup feeds arbitrary answers to the lookup decoder: it never
// panics, and what it accepts is an entry for the key asked, with an
// upper-case currency, a known status and a UTC time.
func FuzzDecodeLookup(f *testing.F) {
	f.Add([]byte(`{"key":"k","amount":1250,"currency":"eur","status":"succeeded","applied_at":"2025-03-01T12:00:00Z"}`), "k")
	f.Add([]byte(`{"key":"k","amount":-1,"currency":"USD","status":"declined","applied_at":"2025-03-01T12:00:00.5+02:00"}`), "k")
	f.Add([]byte(`{"key":"other","amount":1,"currency":"EUR","status":"applied","applied_at":"2025-03-01T12:00:00Z"}`), "k")
	f.Add([]byte(`{"key":"k","currency":"EUR","status":"applied"}`), "k")
	f.Add([]byte(`[1,2`), "k")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		a, err := decodeLookup(body, key)
		if err != nil {
			return
		}
		if a.Key != key || a.Currency != strings.ToUpper(a.Currency) || a.Currency == "" {
			t.Fatalf("accepted %q for key %q as %+v", body, key, a)
		}
		if a.Status != reconcile.StatusApplied && a.Status != reconcile.StatusFailed {
			t.Fatalf("accepted status %v", a.Status)
		}
		if a.AppliedAt.Location() != time.UTC {
			t.Fatalf("applied_at not in UTC: %v", a.AppliedAt)
		}
		if string(a.Result) != string(body) {
			t.Fatal("the recorded result is not the provider's answer")
		}
	})
}
