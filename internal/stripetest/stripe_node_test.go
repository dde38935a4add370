package stripetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needNode returns the directory of the pinned Stripe Node client with its
// modules installed (npm ci from package-lock.json), or skips — failing
// under IDEM_REQUIRE_SERVICES=1, as CI sets.
func needNode(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "stripe-node"))
	if err != nil {
		t.Fatal(err)
	}
	unavailable := func(why string) {
		msg := "Stripe's Node client unavailable (" + why + "); install Node.js 20 and npm to run this test"
		if requireServices() {
			t.Fatalf("%s — failing because IDEM_REQUIRE_SERVICES=1", msg)
		}
		t.Skip("SKIP: " + msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		unavailable("no node on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "stripe", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			unavailable("no npm on PATH")
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			unavailable("npm ci: " + err.Error() + ": " + string(out))
		}
	}
	return dir
}

// nodeResult is one line of proxy.js: what stripe-node made of a
// scenario's last call (and of its first, where it has one).
type nodeResult struct {
	Name, Order                               string
	OK                                        bool
	ID, Replayed, RequestID, IdempotencyKey   string
	StripeVersion                             string
	Class, RawType, Code, RetryAfter, Message string
	ShouldRetry                               string
	StatusCode, MS                            int
	FirstID, FirstRequestID                   string
	FirstOK                                   bool
	First                                     *nodeResult
}

func (r nodeResult) String() string {
	if r.OK {
		return "charge " + r.ID + " (replayed=" + r.Replayed + ") after " + strconv.Itoa(r.MS) + "ms"
	}
	return r.Class + " " + strconv.Itoa(r.StatusCode) + " " + r.RawType + "/" + r.Code + " after " + strconv.Itoa(r.MS) + "ms"
}

// TestStripeNode runs stripe-node (version pinned in
// testdata/stripe-node/package-lock.json) through the built proxy under
// each profile, with the scenarios of TestStripeGo.
func TestStripeNode(t *testing.T) {
	dir := needNode(t)
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t)
			p := startProxy(t, proxyArgs(u, pr)...)
			slow, busy := 1800, 1500
			scenarios := "timeout,concurrent,mismatch,replay,unknown,fix"
			if pr.reject {
				// Slow enough that stripe-node's own retries of a 409
				// (two, half a second to a second apart) end first.
				slow, busy, scenarios = 4000, 4000, "timeout,concurrent"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "proxy.js")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "IDEM_BASE="+p.url, "IDEM_PROFILE="+pr.name, "IDEM_SCENARIOS="+scenarios,
				"IDEM_SLOW_MS="+strconv.Itoa(slow), "IDEM_BUSY_MS="+strconv.Itoa(busy))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			out, err := cmd.Output()
			t.Logf("node took %v", time.Since(start))
			if err != nil {
				t.Fatalf("node proxy.js: %v\n%s", err, stderr.String())
			}
			got := map[string]nodeResult{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var r nodeResult
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("proxy.js output %q: %v", sc.Text(), err)
				}
				got[r.Name] = r
			}
			for _, name := range strings.Split(scenarios, ",") {
				r, ok := got[name]
				if !ok {
					t.Errorf("%s: no result from proxy.js", name)
					continue
				}
				t.Logf("stripe-node %-6s %-10s %s; upstream charges: %d", pr.name, name, r, u.effects(r.Order))
				checkNode(t, pr, u, r)
			}
		})
	}
}

// checkNode fails unless r is the right outcome of its scenario under pr,
// with the upstream's charges for it.
func checkNode(t *testing.T, pr profile, u *upstream, r nodeResult) {
	t.Helper()
	wantErr := func(r nodeResult, class string, status int, code string) {
		t.Helper()
		if r.OK || r.Class != class || r.StatusCode != status || r.Code != code {
			t.Errorf("%s: stripe-node %s; want %s %d %s", r.Name, r, class, status, code)
		}
		if pr.stripe && r.RequestID == "" {
			t.Errorf("%s: %s without a requestId", r.Name, r.Class)
		}
	}
	wantCharge := func(replayed bool) {
		t.Helper()
		if !r.OK || (r.Replayed == "true") != replayed {
			t.Errorf("%s: stripe-node %s; want a charge, replayed=%v", r.Name, r, replayed)
		}
	}
	effects := 1
	switch r.Name {
	case "timeout":
		if pr.reject {
			wantErr(r, "StripeAPIError", 409, "idempotency_key_in_use")
		} else {
			wantCharge(true)
		}
	case "concurrent":
		if pr.reject {
			wantErr(r, "StripeAPIError", 409, "idempotency_key_in_use")
		} else if wantCharge(true); r.ID != r.FirstID {
			t.Errorf("concurrent: the duplicate got %s, the first %s", r.ID, r.FirstID)
		}
	case "mismatch":
		if pr.stripe {
			wantErr(r, "StripeIdempotencyError", 400, "idempotency_key_mismatch")
		} else {
			wantErr(r, "StripeAPIError", 422, "idempotency_key_mismatch")
		}
	case "replay":
		wantCharge(true)
		if r.ID != r.FirstID || r.RequestID != r.FirstRequestID {
			t.Errorf("replay: %s requestId %q; want %s, %q", r.ID, r.RequestID, r.FirstID, r.FirstRequestID)
		}
		if pr.stripe && (r.IdempotencyKey != r.Order || r.StripeVersion != stripeVersion) {
			t.Errorf("replay: idempotencyKey %q, apiVersion %q; want %q, %q", r.IdempotencyKey, r.StripeVersion, r.Order, stripeVersion)
		}
	case "unknown":
		wantErr(*r.First, "StripeAPIError", 504, "upstream_timeout")
		// A 409 is StripeAPIError in stripe-node whatever its type (it
		// raises StripeIdempotencyError for 400 and 404 only); the raw
		// type and code say what it is, and it is not retried.
		wantErr(r, "StripeAPIError", 409, "idempotency_outcome_unknown")
		if r.RawType != "idempotency_error" || r.RetryAfter != "" || r.ShouldRetry != "false" {
			t.Errorf("unknown: type %q, Retry-After %q, Stripe-Should-Retry %q; want idempotency_error, none, false", r.RawType, r.RetryAfter, r.ShouldRetry)
		}
	case "fix":
		wantErr(*r.First, "StripeInvalidRequestError", 400, "parameter_missing")
		if pr.stripe {
			wantCharge(false)
		} else {
			wantErr(r, "StripeAPIError", 422, "idempotency_key_mismatch")
			effects = 0
		}
	}
	wantEffects(t, u, r.Order, effects)
}
