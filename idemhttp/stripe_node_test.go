package idemhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// problemStatus is the status each problem type is answered with (see the
// table in docs/http.md); response-too-large carries the applied request's
// own status.
var problemStatus = map[string]int{
	"key-missing": 400, "key-invalid": 400, "body-too-large": 413, "body-invalid-json": 400,
	"body-unreadable": 400, "key-mismatch": 422, "in-flight": 409, "outcome-unknown": 409,
	"store-unavailable": 503, "request-cancelled": 499, "response-too-large": 201,
	"scope-missing": 401, "scope-invalid": 400, "upstream-unreachable": 502,
	"upstream-timeout": 504, "record-unreadable": 500, "internal-error": 500,
	"upgrade-refused": 400, "encoding-not-acceptable": 406, "scope-quota": 429,
}

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
		if os.Getenv("IDEM_REQUIRE_SERVICES") == "1" { // testenv.Required: idemhttp is in the root module, which does not require the test module
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

// TestStripeNodeRaisesEveryProblem runs Stripe's official Node client
// (testdata/stripe-node, version pinned in package-lock.json) against
// every problem type idemhttp writes and against a middleware round: the
// SDK must raise an error for each problem — never resolve one as a
// resource, which is how an application charges twice — and a replay must
// keep the upstream's Request-Id.
func TestStripeNodeRaisesEveryProblem(t *testing.T) {
	dir := needNode(t)
	st := memstore.New()
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.HeaderScope("Authorization"),
		Rules: []idemhttp.Rule{{Methods: []string{"POST"}, Requirement: idemhttp.Required}}})
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/problems/{anchor}", func(w http.ResponseWriter, r *http.Request) {
		a := r.PathValue("anchor")
		idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.ProblemBase + a, Title: a, Status: problemStatus[a], Detail: "test of " + a})
	})
	mux.Handle("POST /v1/charges", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		_ = r.ParseForm()
		if r.PostForm.Get("amount") == "7000" {
			idemhttp.MarkUnknown(r.Context())
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_upstream_1")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"ch_1","object":"charge","amount":5000}`))
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	anchors := make([]string, 0, len(problemStatus))
	for a := range problemStatus {
		anchors = append(anchors, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IDEM_BASE="+srv.URL, "IDEM_ANCHORS="+strings.Join(anchors, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.js: %v\n%s", err, stderr.String())
	}
	type result struct {
		Name, Class, Type, RawType, Code, ID, Replayed, RequestID, ShouldRetry string
		Threw                                                                  bool
		StatusCode                                                             int
	}
	got := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		got[r.Name] = r
	}
	for _, a := range anchors {
		r, ok := got["problem:"+a]
		switch {
		case !ok:
			t.Errorf("%s: no result from the client", a)
		case !r.Threw:
			t.Errorf("%s: stripe-node resolved the problem as a resource (id %q): an application would take it for success", a, r.ID)
		case r.RawType == "" || r.Code == "":
			t.Errorf("%s: raised %s without the error member's type/code: %+v", a, r.Class, r)
		}
	}
	if r := got["charge:first"]; r.Threw || r.ID != "ch_1" {
		t.Errorf("first charge = %+v; want the charge", r)
	}
	if r := got["charge:replay"]; r.Threw || r.ID != "ch_1" || r.Replayed != "true" || r.RequestID != "req_upstream_1" {
		t.Errorf("replayed charge = %+v; want ch_1 replayed with the upstream's Request-Id", r)
	}
	if r := got["charge:mismatch"]; !r.Threw || r.Class != "StripeAPIError" || r.RawType != "invalid_request_error" || r.Code != "idempotency_key_mismatch" || r.ShouldRetry != "false" {
		t.Errorf("mismatch = %+v; want an invalid_request_error the SDK does not retry", r)
	}
	if r := got["charge:unknown-retry"]; !r.Threw || r.RawType != "idempotency_error" || r.Code != "idempotency_outcome_unknown" || r.ShouldRetry != "false" {
		t.Errorf("retry of an unknown outcome = %+v; want an idempotency_error the SDK does not retry", r)
	}
	if charges != 2 {
		t.Errorf("the handler ran %d times, want 2 (the first charge, the unknown one once)", charges)
	}
}
