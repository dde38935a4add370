package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// The attack of issue 17: in a global scope, another caller's body was
// recovered field by field from the 422's list of differing fields, by
// reusing its key with guessed bodies. Now every guess that is not the
// whole body gets the same answer, byte for byte: nothing is learnt.
func TestMismatchIsNoOracleInGlobalScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.GlobalScope}, created(&n))
		wantStatus(t, e.do("POST", "/transfers", `"victim-1"`, `{"amount":5000,"to":"DE89"}`), http.StatusCreated)
		var first string
		guesses := 0
		for _, to := range []string{"DE89", "DE88", "FR76", "GB29", "NL91"} {
			for _, amount := range []int{100, 4999, 5000, 5001, 9000, 10000, 20000} {
				if to == "DE89" && amount == 5000 {
					continue // the whole body: a replay, which a global scope allows by design
				}
				guesses++
				r := e.do("POST", "/transfers", `"victim-1"`, fmt.Sprintf(`{"amount":%d,"to":%q}`, amount, to))
				p := wantProblem(t, r, http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
				if len(p.Fields) != 0 {
					t.Fatalf("guess amount=%d to=%s: the 422 names fields %v in a global scope", amount, to, p.Fields)
				}
				if first == "" {
					first = r.body
				} else if r.body != first {
					t.Fatalf("guess amount=%d to=%s answered %s, another guess %s", amount, to, r.body, first)
				}
			}
		}
		if guesses != 34 || e.calls.Load() != 1 {
			t.Fatalf("%d guesses, handler ran %d times; want 34 and 1", guesses, e.calls.Load())
		}
	})
}

// Per-principal scopes: the same body in two scopes is recorded with
// field digests that have nothing in common, so records cannot be compared
// across callers; and a caller reusing another's key only reaches its own
// namespace.
func TestFieldDigestsAreKeyedPerScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: idemhttp.TrustedHeaderScope("X-User-Id")}, created(&n))
		body := `{"amount":5000,"currency":"EUR","to":"DE89","memo":"rent","ref":"DE89"}`
		seen := map[string]string{}
		for _, user := range []string{"alice", "bob", "carol"} {
			wantStatus(t, e.do("POST", "/transfers", `"k1"`, body, "X-User-Id", user), http.StatusCreated)
			rec, err := e.store.Get(context.Background(), user, "k1")
			if err != nil {
				t.Fatal(err)
			}
			in, err := idem.DecodeIntent(rec.Intent)
			if err != nil || in == nil {
				t.Fatalf("intent %q: %v", rec.Intent, err)
			}
			_, enc, _ := strings.Cut(in.Fields["body_hmac"], ":")
			q, err := url.ParseQuery(enc)
			if err != nil || len(q) != 5 {
				t.Fatalf("%s: digests %q (%v), want 5", user, in.Fields["body_hmac"], err)
			}
			for name, v := range q {
				if prev, ok := seen[v[0]]; ok {
					t.Errorf("%s's digest of %q equals %s", user, name, prev)
				}
				seen[v[0]] = user + "'s digest of " + name
			}
			if strings.Contains(string(rec.Intent), "body_xxh64") {
				t.Errorf("%s's record keeps unkeyed digests: %s", user, rec.Intent)
			}
		}
		if e.calls.Load() != 3 {
			t.Fatalf("handler ran %d times, want 3 (one per principal)", e.calls.Load())
		}
		// bob guessing alice's body with alice's key reaches only his own
		// record: his own differing fields, never a comparison with hers.
		p := wantProblem(t, e.do("POST", "/transfers", `"k1"`, `{"amount":5000,"currency":"EUR","to":"FR76","memo":"rent","ref":"DE89"}`, "X-User-Id", "bob"),
			http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if strings.Join(p.Fields, ",") != "to" {
			t.Fatalf("fields %v, want [to]", p.Fields)
		}
	})
}
