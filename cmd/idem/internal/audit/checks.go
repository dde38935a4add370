package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/burst"
	"github.com/idemkit/idem/internal/jsonmembers"
)

// finding is a failed check's explanation.
type finding string

// skip is a check that did not run, and why.
type skip string

// inconclusive is a check whose answers were right but which only an
// effect count can decide, and why.
type inconclusive string

func (f finding) Error() string      { return string(f) }
func (s skip) Error() string         { return string(s) }
func (i inconclusive) Error() string { return string(i) }

func fail(format string, args ...any) error { return finding(fmt.Sprintf(format, args...)) }

// errBaseline: the request itself does not succeed.
type errBaseline struct{ r *reply }

func (e errBaseline) Error() string {
	return fmt.Sprintf("the request got %s; the audit needs a --method, --path, --body and --header that succeed (2xx)", e.r)
}

// counted runs f, which sends requests, and checks that the effect count
// grew by exactly want over them: one per intent that succeeds, none for
// a refused request. It adds what it saw to the running check's tally.
// Without a count source it only runs f, and notes that the check's
// requests went uncounted. f's error wins; then a count that is off is a
// finding, whatever the answers were.
func (a *Auditor) counted(ctx context.Context, want int64, what string, f func() error) error {
	before, ok, err := a.effects(ctx)
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	if !ok {
		a.uncounted = true
		return nil
	}
	after, _, err := a.effects(ctx)
	if err != nil {
		return err
	}
	made := after - before
	if a.tally == nil {
		a.tally = &EffectCount{}
	}
	a.tally.Made += made
	a.tally.Want += want
	if made != want {
		return fail("%s made %d effects (the count went %d → %d), want %d", what, made, before, after, want)
	}
	return nil
}

// decided ends a check whose answers were right. When its claim rests on
// an answer repeated (a replay), the answers alone cannot show that the
// effect did not run again — an API that runs it for every request and
// answers alike looks the same — so without an effect count the check is
// inconclusive, not a pass.
func (a *Auditor) decided(detail string, needsCount bool) (string, error) {
	switch {
	case a.tally != nil:
		return fmt.Sprintf("%s; %d effect(s), as wanted", detail, a.tally.Made), nil
	case needsCount && a.uncounted:
		return "", inconclusive(detail + "; effects not counted, so a repeated effect behind the repeated answer cannot be ruled out (pass --effects-url or --fixture)")
	}
	return detail, nil
}

func (a *Auditor) replay(ctx context.Context) (string, error) {
	key := a.newKey("replay")
	var r1, r2 *reply
	err := a.counted(ctx, 1, "the same request sent twice with one key", func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		if !r1.ok() {
			return errBaseline{r1}
		}
		r2, err = a.send(ctx, key, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r2.sameAs(r1) {
		return "", fail("the same request sent twice with one key got %s, then %s: want the first answer repeated (the same status and body)", r1, r2)
	}
	return a.decided(fmt.Sprintf("second answer repeats the first (%d%s)", r2.status, map[bool]string{true: ", " + idemhttp.ReplayedHeader + ": true"}[r2.replayed()]), true)
}

func (a *Auditor) divergence(ctx context.Context) (string, error) {
	if err := a.reserve(4 + 2*a.urlCounts()); err != nil {
		return "", err
	}
	key := a.newKey("divergence")
	changed := jsonmembers.Changed(a.body)
	var r1, r2 *reply
	err := a.counted(ctx, 1, "a request and another request with its key", func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		r2, err = a.send(ctx, key, changed)
		return err
	})
	var f finding
	if err != nil && !errors.As(err, &f) {
		return "", err
	}
	if r2 != nil {
		a.noteError("divergence", r2)
	}
	switch {
	case r2 == nil:
	case r2.ok() && r2.sameAs(r1):
		return "", fail("the key reused with another body (%s) got the first request's answer %s: want 422, the recorded answer of one request was served for another (fingerprint the request body)", clipText(changed), r2)
	case r2.ok():
		return "", fail("the key reused with another body (%s) got %s: want 422 (the key must bind one request)", clipText(changed), r2)
	case r2.status >= 500:
		return "", fail("the key reused with another body got %s: want 422", r2)
	}
	if err != nil {
		return "", err
	}
	detail := fmt.Sprintf("another body with the key is refused (%d)", r2.status)
	if r2.status != http.StatusUnprocessableEntity {
		detail += "; the draft's status is 422"
	}
	reordered, ok := jsonmembers.Reordered(a.body)
	if !ok {
		return a.decided(detail, false)
	}
	key = a.newKey("reordered")
	var r3, r4 *reply
	err = a.counted(ctx, 1, "a JSON body and the same body reordered, with one key", func() (err error) {
		if r3, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		r4, err = a.send(ctx, key, reordered)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r4.sameAs(r3) {
		return "", fail("the same JSON body with its members reordered got %s after %s: want a replay (fingerprint the parsed document, not its bytes)", r4, r3)
	}
	return a.decided(detail+"; the body reordered replays", true)
}

// burstSuccess is the answer the duplicates of a burst are compared with:
// a success not marked as a replay if there is one (the request that ran),
// else the first success; nil when none succeeded.
func burstSuccess(answers []*reply) *reply {
	var first *reply
	for _, r := range answers {
		if r.ok() && (first == nil || !r.replayed() && first.replayed()) {
			first = r
		}
	}
	return first
}

func (a *Auditor) concurrency(ctx context.Context) (string, error) {
	n := a.o.Concurrency
	if err := a.reserve(n + a.urlCounts()); err != nil {
		return "", err
	}
	key := a.newKey("concurrency")
	answers := make([]*reply, n)
	errs := make([]error, n)
	err := a.counted(ctx, 1, fmt.Sprintf("%d identical requests sent at once", n), func() error {
		burst.Run(n, func(i int) { answers[i], errs[i] = a.send(ctx, key, a.body) })
		return errors.Join(errs...)
	})
	var f finding
	if err != nil && !errors.As(err, &f) {
		return "", err
	}
	a.conc = &burstResult{answers: answers, effects: a.tally}
	if err != nil {
		return "", err
	}
	first := burstSuccess(answers)
	if first == nil {
		return "", fail("%d identical requests sent at once: none succeeded (first: %s)", n, answers[0])
	}
	var ok, refused int
	for _, r := range answers {
		switch {
		case r.ok() && !r.sameAs(first):
			return "", fail("%d identical requests sent at once got two different successes, %s and %s: each is an effect of its own; want one effect and the same answer for all", n, first, r)
		case r.ok():
			ok++
		default:
			refused++
		}
	}
	return a.decided(fmt.Sprintf("%d identical requests at once: %d identical successes, %d refused", n, ok, refused), true)
}

// inFlightAnswer reports whether r is a documented answer to a duplicate
// whose first request is still running: 409 (in-flight) or 425 (Too
// Early), with Retry-After.
func inFlightAnswer(r *reply) bool {
	return (r.status == http.StatusConflict || r.status == http.StatusTooEarly) && r.header.Get("Retry-After") != ""
}

func (a *Auditor) inFlight(context.Context) (string, error) {
	if a.conc == nil {
		return "", skip("needs the concurrency check's answers")
	}
	// The duplicates are the concurrency check's burst; so are the effects.
	a.tally, a.uncounted = a.conc.effects, a.conc.effects == nil
	first := burstSuccess(a.conc.answers)
	if first == nil {
		return "", fail("none of %d identical requests sent at once succeeded, so none was in flight: want the first to succeed", len(a.conc.answers))
	}
	var refused, same int
	for _, r := range a.conc.answers {
		switch {
		case r.ok() && r.sameAs(first):
			same++
		case r.ok():
			return "", fail("a duplicate in flight got a success of its own, %s, besides %s: it ran the request again; want the first answer (a wait, then the replay) or 409 with Retry-After", r, first)
		case inFlightAnswer(r):
			refused++
			a.noteError("in-flight", r)
		case r.status == http.StatusConflict || r.status == http.StatusTooEarly:
			a.noteError("in-flight", r)
			return "", fail("a duplicate in flight got %s without Retry-After: want 409 with Retry-After, or a wait then the replay", r)
		default:
			a.noteError("in-flight", r)
			return "", fail("a duplicate in flight got %s: want 409 with Retry-After, or a wait then the replay", r)
		}
	}
	if e := a.conc.effects; e != nil && e.Made != e.Want {
		return "", fail("%d duplicates in flight made %d effects in all, want %d: a duplicate ran the effect while the first was in flight, whatever it answered", len(a.conc.answers), e.Made, e.Want)
	}
	detail := fmt.Sprintf("%d duplicates in flight refused with %d/%d and Retry-After, %d got the first answer", refused, http.StatusConflict, http.StatusTooEarly, same-1)
	if refused == 0 {
		detail = fmt.Sprintf("%d duplicates got the first answer (they waited, or arrived after it finished)", same-1)
	}
	return a.decided(detail, true)
}

func (a *Auditor) missingKey(ctx context.Context) (string, error) {
	if !a.o.RequireKey {
		return "", skip("pass --require-key when the API must refuse the request without a key")
	}
	var r *reply
	err := a.counted(ctx, 0, "the request without a key", func() (err error) {
		r, err = a.send(ctx, keyNone, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	a.noteError("missing-key", r)
	if r.status != http.StatusBadRequest {
		return "", fail("the request without an %s got %s: want 400 (a retry of it could apply it twice)", idemhttp.HeaderName, r)
	}
	return a.decided("400 without a key", false)
}

func (a *Auditor) keyLimits(ctx context.Context) (string, error) {
	if err := a.reserve(3 + a.urlCounts()); err != nil {
		return "", err
	}
	cases := []struct{ what, key string }{
		{"an empty key", ""},
		{"a key of 256 characters", strings.Repeat("k", 256)},
		{"a key with a control character", "idem-audit\x01" + a.run1},
	}
	var bad []string
	err := a.counted(ctx, 0, "requests with malformed keys", func() error {
		for _, c := range cases {
			var r *reply
			var err error
			if strings.ContainsFunc(c.key, func(r rune) bool { return r < 0x20 }) {
				r, err = a.sendRaw(ctx, c.key)
			} else {
				r, err = a.send(ctx, c.key, a.body)
				a.noteError("key-limits", r)
			}
			if err != nil {
				return err
			}
			if r.status != http.StatusBadRequest {
				bad = append(bad, fmt.Sprintf("%s got %s", c.what, r))
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(bad) > 0 {
		return "", fail("%s: want 400 (keys are 1 to 255 printable ASCII characters; a key cut or cleaned into acceptance can collide with another)", strings.Join(bad, "; "))
	}
	return a.decided("400 for an empty key, 256 characters and a control character", false)
}

func (a *Auditor) scope(ctx context.Context) (string, error) {
	if a.o.AsA == "" {
		return "", skip("pass --as-a and --as-b (two principals' credentials) to check scope isolation")
	}
	key := a.newKey("scope")
	var rA, rB *reply
	err := a.counted(ctx, 1, "principal A's request", func() (err error) {
		rA, err = a.send(ctx, key, a.body, a.a)
		return err
	})
	if err != nil {
		return "", err
	}
	if !rA.ok() {
		return "", fail("principal A's request got %s: want success (check --as-a)", rA)
	}
	err = a.counted(ctx, 1, "principal B's request with A's key", func() (err error) {
		rB, err = a.send(ctx, key, a.body, a.b)
		return err
	})
	var f finding
	switch {
	case errors.As(err, &f):
		return "", fail("principal B sent the key A had used: %s; B's request must run on its own, never get A's recorded answer (scope keys by the authenticated principal)", f)
	case err != nil:
		return "", err
	case rB.replayed():
		return "", fail("principal B sent the key A had used and got A's recorded answer %s: scope keys by the authenticated principal", rB)
	case rB.status == http.StatusUnprocessableEntity || rB.status == http.StatusConflict:
		a.noteError("scope", rB)
		return "", fail("principal B sent the key A had used and got %s: B's key was compared with A's record, so keys are not scoped by principal", rB)
	case !rB.ok():
		return "", fail("principal B's request got %s: want success (check --as-b)", rB)
	case rB.sameAs(rA) && a.uncounted:
		// B's answer is A's: A's record served to B, or an API whose
		// answers do not tell two effects apart. Only a count can say.
		return "", inconclusive(fmt.Sprintf("principal B sent the key A had used and got the same answer as A (%s): A's recorded answer, unless the API answers two effects alike; effects not counted (pass --effects-url or --fixture)", rB))
	}
	return a.decided("B's request with A's key ran on its own", false)
}

func (a *Auditor) problemFormat(context.Context) (string, error) {
	a.mu.Lock()
	answers := a.errAns
	a.mu.Unlock()
	if len(answers) == 0 {
		return "", skip("no error answers to look at")
	}
	var bad []string
	for _, p := range answers {
		if why := problemDefect(p.r); why != "" {
			bad = append(bad, fmt.Sprintf("%d from %s: %s", p.r.status, p.probe, why))
		}
	}
	if len(bad) > 0 {
		return "", fail("%s (RFC 9457: Content-Type application/problem+json, a JSON object with type, title, status)", strings.Join(bad, "; "))
	}
	return fmt.Sprintf("%d error answers are application/problem+json", len(answers)), nil
}

// problemDefect says what keeps r from being an RFC 9457 problem, or "".
func problemDefect(r *reply) string {
	mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil || mt != idemhttp.ProblemContentType {
		return fmt.Sprintf("Content-Type %q, not %s", r.header.Get("Content-Type"), idemhttp.ProblemContentType)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		return "the body is not a JSON object"
	}
	if t, ok := doc["type"]; ok {
		if _, isStr := t.(string); !isStr {
			return "\"type\" is not a string"
		}
	}
	if s, ok := doc["status"]; ok {
		if n, isNum := s.(float64); !isNum || int(n) != r.status {
			return fmt.Sprintf("\"status\" %v differs from the HTTP status", s)
		}
	}
	return ""
}

func (a *Auditor) retention(ctx context.Context) (string, error) {
	ttl := a.o.TTL
	switch {
	case ttl == 0:
		return "", skip("pass --ttl DUR (the advertised retention) and --slow")
	case !a.o.Slow:
		return "", skip(fmt.Sprintf("waits %v: pass --slow", ttl-retentionMargin(ttl)))
	}
	key := a.newKey("retention")
	wait := ttl - retentionMargin(ttl)
	var r1, r2 *reply
	err := a.counted(ctx, 1, fmt.Sprintf("the same request sent twice, %v apart", wait), func() (err error) {
		if r1, err = a.send(ctx, key, a.body); err != nil {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		r2, err = a.send(ctx, key, a.body)
		return err
	})
	if err != nil {
		return "", err
	}
	if !r2.sameAs(r1) {
		return "", fail("the same request %v after the first (advertised TTL %v) got %s after %s: want the replay", wait, ttl, r2, r1)
	}
	return a.decided(fmt.Sprintf("replays %v after the first request (TTL %v)", wait, ttl), true)
}

// retentionMargin is how long before the TTL the retention check replays.
func retentionMargin(ttl time.Duration) time.Duration {
	return min(ttl/10, time.Hour)
}
