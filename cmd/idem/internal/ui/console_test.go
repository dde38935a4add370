package ui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

var nextLinkR = regexp.MustCompile(`id="next-page" href="([^"]+)"`)

var regexpFence = regexp.MustCompile(`name="fence" value="([0-9]+)"`)

// lapsed makes an in_progress record whose lease has passed: unknown to
// every reader, listed from the server's snapshot.
func (f *fixture) lapsed(scope, key string) *idem.Record {
	f.t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	cr, err := f.st.Claim(context.Background(), idem.ClaimParams{Scope: scope, Key: key, AttemptID: "a-" + key,
		Intent: []byte(`{"operation":"charge","amount":990,"currency":"EUR","origin":"http","fields":{"method":"POST","path":"/v1/charges"}}`),
		Now:    now, LeaseUntil: now.Add(time.Second)})
	if err != nil || !cr.Claimed {
		f.t.Fatalf("claim %s: %v", key, err)
	}
	return &cr.Record
}

// operatorDecide is Config.Decide as idem ui wires it, over the fixture's
// store: a lease-expired in_progress record is marked unknown first, then
// the engine resolves it, fenced.
func operatorDecide(f **fixture) func(ctx context.Context, d Decision) (*idem.Record, error) {
	return func(ctx context.Context, d Decision) (*idem.Record, error) {
		st := (*f).st
		eng, err := idem.New(st, idem.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		defer eng.Close()
		if cur, err := st.Get(ctx, d.Scope, d.Key); err == nil && cur.LeaseExpired(time.Now()) {
			_, _ = st.Finish(ctx, idem.FinishParams{Scope: cur.Scope, Key: cur.Key, Fence: cur.Fence, AttemptID: cur.AttemptID,
				State: idem.StateUnknown, CompletedAt: time.Now().UTC().Truncate(time.Microsecond)})
		}
		res := idem.Resolution{Actor: d.Operator, Reason: d.Reason, IfFence: d.IfFence}
		if d.As == "released" {
			res.Release = true
		} else {
			res.As = idem.State(d.As)
			cur, err := st.Get(ctx, d.Scope, d.Key)
			if err != nil {
				return nil, err
			}
			dec := idem.Decision{As: res.As, Status: d.Status, ContentType: d.ContentType, Message: d.Reason}
			if d.HasBody {
				dec.Body = d.Body
			}
			if res.Result, err = idem.EncodeDecision(cur, dec); err != nil {
				return nil, err
			}
		}
		return eng.Resolve(ctx, d.Scope, idem.Key(d.Key), res)
	}
}

// consoleFixture is a fixture whose Decide is operatorDecide.
func consoleFixture(t *testing.T, cfg Config) *fixture {
	var f *fixture
	cfg.Decide = operatorDecide(&f)
	f = newFixture(t, cfg)
	return f
}

// decideOnPage posts the record page's form as an operator would.
func (f *fixture) decideOnPage(scope, key string, form url.Values) *http.Response {
	f.t.Helper()
	_, page := f.get(recordLink(scope, key))
	csrf, ver := fields(f.t, page)
	fence := regexpFence.FindStringSubmatch(page)
	if fence == nil {
		f.t.Fatalf("record page without a fence:\n%s", page)
	}
	form.Set("csrf", csrf)
	form.Set("version", ver)
	form.Set("fence", fence[1])
	form.Set("scope", scope)
	form.Set("key", key)
	resp, body := f.decide(form) // its preview first, as the page asks
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("decision on %s: %d\n%s", key, resp.StatusCode, body)
	}
	return resp
}

// A record decided through this server leaves the unknown list at once,
// though the list takes lease-expired records from a snapshot that is
// refreshed only every RunningEvery (an hour here): the decision is
// overlaid on the snapshot. Before, the list kept it until the next
// snapshot and its link answered "No such record".
func TestDecisionLeavesTheListAtOnce(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{RunningEvery: time.Hour})
	f.login("alice")
	for _, k := range []string{"lapsed-released", "lapsed-failed", "lapsed-kept"} {
		f.lapsed("", k)
	}
	f.s.refreshRunning(context.Background())
	_, body := f.get("/unknown")
	for _, k := range []string{"lapsed-released", "lapsed-failed", "lapsed-kept"} {
		if !strings.Contains(body, ">"+k+"<") {
			t.Fatalf("%s is not on the unknown list before any decision:\n%s", k, body)
		}
	}
	f.decideOnPage("", "lapsed-released", url.Values{"as": {"released"}, "reason": {"never charged"}})
	f.decideOnPage("", "lapsed-failed", url.Values{"as": {"failed"}, "reason": {"declined"}})
	for _, page := range []string{"/unknown", "/unknown?released=lapsed-released"} {
		_, body = f.get(page)
		for _, k := range []string{"lapsed-released", "lapsed-failed"} {
			if strings.Contains(body, ">"+k+"</a>") {
				t.Fatalf("%s still lists %s, decided a moment ago:\n%s", page, k, body)
			}
		}
		if !strings.Contains(body, ">lapsed-kept<") {
			t.Fatalf("%s lost lapsed-kept, which nobody decided:\n%s", page, body)
		}
	}
	if _, body = f.get("/"); strings.Contains(body, "lapsed-released") {
		t.Fatalf("the overview names a released record as the oldest unknown:\n%s", body)
	}
	// The next snapshot has the decisions: the overlay forgets them.
	f.s.refreshRunning(context.Background())
	f.s.decided.mu.Lock()
	n := len(f.s.decided.m)
	f.s.decided.mu.Unlock()
	if n != 0 {
		t.Fatalf("the overlay keeps %d decisions a newer snapshot reflects", n)
	}
}

// The overlay hides only the record as it was decided: a claim made after
// a release (fence 1 again, created later) is a new record and shows.
func TestDecidedStale(t *testing.T) {
	t.Parallel()
	at := time.Now()
	var d decided
	d.note("s", "k", 2, at)
	for _, c := range []struct {
		r    idem.Record
		want bool
	}{
		{idem.Record{Scope: "s", Key: "k", Fence: 2, CreatedAt: at.Add(-time.Minute)}, true},
		{idem.Record{Scope: "s", Key: "k", Fence: 1, CreatedAt: at.Add(-time.Hour)}, true},
		{idem.Record{Scope: "s", Key: "k", Fence: 1, CreatedAt: at.Add(time.Second)}, false},
		{idem.Record{Scope: "s", Key: "k", Fence: 3, CreatedAt: at.Add(-time.Minute)}, false},
		{idem.Record{Scope: "other", Key: "k", Fence: 2, CreatedAt: at.Add(-time.Minute)}, false},
	} {
		if got := d.stale(&c.r); got != c.want {
			t.Errorf("stale(%s/%s fence %d created %v) = %v, want %v", c.r.Scope, c.r.Key, c.r.Fence, c.r.CreatedAt.Sub(at), got, c.want)
		}
	}
}

// The new pages keep the CSP's promise: no inline script, style or event
// handler; the auto-refresh and keyboard script is the served app.js.
func TestConsolePagesHaveNoInlineCode(t *testing.T) {
	t.Parallel()
	f := consoleFixture(t, Config{Provider: fakeProvider(t, map[string]string{"p-1": providerObj})})
	f.login("alice")
	f.unknown("", "p-1", "charge", 0)
	csrf, sel := selections(t, f, "/unknown")
	_, preview := f.post("/bulk/preview", url.Values{"csrf": {csrf}, "sel": {sel["p-1"]}, "as": {"released"}, "reason": {"r"}})
	_, records := f.get("/records?key=p&match=prefix")
	_, lookup := f.get("/record/lookup?key=p-1")
	_, unknown := f.get("/unknown")
	inline := regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle="|<style|\son[a-z]+="`)
	for name, body := range map[string]string{"preview": preview, "records": records, "lookup": lookup, "unknown": unknown} {
		if inline.MatchString(body) {
			t.Errorf("%s has inline code", name)
		}
	}
	for name, body := range map[string]string{"records": records, "unknown": unknown} {
		if !strings.Contains(body, `id="autorefresh"`) || !strings.Contains(body, `id="select-all"`) {
			t.Errorf("%s lacks the auto-refresh switch or the select-all box", name)
		}
	}
}
