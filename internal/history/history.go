// Package history records what the clients of a fault test saw and checks
// it against what the upstream and the store saw.
//
// A fault test runs clients against a real process (the idem proxy) over a
// real store while it breaks something — the client, the upstream, the
// store — and records each client call as an operation: [Invoke] when it
// is sent, then one of [OK] (a complete answer: status and body), [Fail]
// (a definite answer that this call did nothing, such as 409 in-flight or
// 503 store-unavailable) or [Indeterminate] (the client cannot tell:
// timeout, reset, 504, 409 outcome-unknown). After the run, [Check] holds
// the history against the [Facts] the test gathered on the other side —
// the upstream's arrivals and completions per key, the store's final state
// per key — and reports:
//
//   - duplicates: a key that reached the upstream more than once (the
//     effect must run at most once per intent);
//   - undecided: a key whose upstream call completed but whose record is
//     not succeeded or failed (unknown, in_progress or missing): an
//     outcome idem was given and did not keep;
//   - divergent: a key whose complete answers differ, from each other or
//     from what the upstream sent: a replay must be byte-identical to the
//     first complete answer;
//   - invented: a complete answer for a key the upstream never saw.
//
// Unanswered keys (no complete answer) and the count of unknown records
// are reported too; whether they are violations depends on the scenario
// (an upstream that stalls is genuinely unknown), so [Result.Err] leaves
// them to the caller.
package history

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is what an operation records.
type Kind string

// The kinds of operation.
const (
	// Invoke: a call was sent.
	Invoke Kind = "invoke"
	// OK: the call got a complete answer (first or replayed).
	OK Kind = "ok"
	// Fail: the call got a definite answer that it did nothing (it may
	// be retried with the same key).
	Fail Kind = "fail"
	// Indeterminate: the client cannot tell what the call did.
	Indeterminate Kind = "indeterminate"
)

// Op is one entry of a history.
type Op struct {
	Kind Kind
	Key  string
	// Status and Body are the answer the client saw (OK, and Fail or
	// Indeterminate when an answer came).
	Status int
	Body   []byte
	// Replayed is true when the answer said it was a replay.
	Replayed bool
	// Detail says why a call failed or is indeterminate (a problem type,
	// a client error).
	Detail string
	At     time.Time
}

// History is a concurrency-safe, append-only list of operations.
type History struct {
	mu  sync.Mutex
	ops []Op
}

func (h *History) add(op Op) {
	op.At = time.Now()
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Invoke records that a call for key was sent.
func (h *History) Invoke(key string) { h.add(Op{Kind: Invoke, Key: key}) }

// OK records a complete answer for key.
func (h *History) OK(key string, status int, body []byte, replayed bool) {
	h.add(Op{Kind: OK, Key: key, Status: status, Body: body, Replayed: replayed})
}

// Fail records a definite answer that the call for key did nothing.
func (h *History) Fail(key string, status int, detail string) {
	h.add(Op{Kind: Fail, Key: key, Status: status, Detail: detail})
}

// Indeterminate records a call for key whose effect the client cannot
// know; status is 0 when no answer came.
func (h *History) Indeterminate(key string, status int, detail string) {
	h.add(Op{Kind: Indeterminate, Key: key, Status: status, Detail: detail})
}

// Ops returns a copy of the operations, in the order they were recorded.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Answer is a status and body as the upstream sent them.
type Answer struct {
	Status int
	Body   []byte
}

// Facts are what the test saw outside the clients.
type Facts struct {
	// Arrivals counts, per key, the requests that reached the upstream.
	Arrivals map[string]int
	// Completed holds the keys whose upstream call ran to its end (the
	// upstream sent its whole answer), with the answer it sent.
	Completed map[string]Answer
	// States is each key's final record state in the store
	// ("succeeded", "failed", "unknown", "in_progress"); a key without a
	// record is absent.
	States map[string]string
}

// Result is what [Check] found.
type Result struct {
	// Keys is how many keys the history invoked; Arrivals the sum of
	// upstream arrivals over them; Calls the number of invocations.
	Keys, Arrivals, Calls int
	// States counts the keys by final record state ("none" for no
	// record).
	States map[string]int
	// Unknown lists the keys whose record is unknown.
	Unknown []string
	// Unanswered lists the keys without a complete answer.
	Unanswered []string

	// Violations.
	Duplicates []string // reached the upstream more than once
	Undecided  []string // upstream completed, record not succeeded/failed
	Divergent  []string // complete answers differ (among themselves or from the upstream's)
	Invented   []string // a complete answer the upstream never produced
}

// Check holds the history's operations against the facts.
func Check(ops []Op, f Facts) Result {
	r := Result{States: map[string]int{}}
	first := map[string]*Op{}
	keys := map[string]bool{}
	divergent := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case Invoke:
			r.Calls++
			keys[op.Key] = true
		case OK:
			keys[op.Key] = true
			if a, ok := first[op.Key]; !ok {
				first[op.Key] = op
			} else if a.Status != op.Status || !bytes.Equal(a.Body, op.Body) {
				divergent[op.Key] = true
			}
		}
	}
	for k := range keys {
		n := f.Arrivals[k]
		r.Keys++
		r.Arrivals += n
		if n > 1 {
			r.Duplicates = append(r.Duplicates, k)
		}
		st, ok := f.States[k]
		if !ok {
			st = "none"
		}
		r.States[st]++
		if st == "unknown" {
			r.Unknown = append(r.Unknown, k)
		}
		up, done := f.Completed[k]
		if done && st != "succeeded" && st != "failed" {
			r.Undecided = append(r.Undecided, k)
		}
		a, answered := first[k]
		if !answered {
			r.Unanswered = append(r.Unanswered, k)
			continue
		}
		if n == 0 {
			r.Invented = append(r.Invented, k)
		}
		if done && (a.Status != up.Status || !bytes.Equal(a.Body, up.Body)) {
			divergent[k] = true
		}
	}
	for k := range divergent {
		r.Divergent = append(r.Divergent, k)
	}
	for _, l := range [][]string{r.Unknown, r.Unanswered, r.Duplicates, r.Undecided, r.Divergent, r.Invented} {
		sort.Strings(l)
	}
	return r
}

// Err reports the violations: duplicates, undecided, divergent and
// invented keys. Unknown and unanswered keys are not violations by
// themselves (see the package documentation).
func (r Result) Err() error {
	var errs []error
	for _, v := range []struct {
		what string
		keys []string
	}{
		{"reached the upstream more than once", r.Duplicates},
		{"completed upstream but not recorded as succeeded or failed", r.Undecided},
		{"answered differently across calls or from the upstream's answer", r.Divergent},
		{"answered without reaching the upstream", r.Invented},
	} {
		if len(v.keys) > 0 {
			errs = append(errs, fmt.Errorf("%d keys %s: %s", len(v.keys), v.what, abbrev(v.keys)))
		}
	}
	return errors.Join(errs...)
}

// String summarises the result in one line: keys, calls, upstream
// arrivals, final states, unknowns, duplicates and the other counts.
func (r Result) String() string {
	states := make([]string, 0, len(r.States))
	for s, n := range r.States {
		states = append(states, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(states)
	return fmt.Sprintf("keys=%d calls=%d upstream_arrivals=%d states[%s] unknown=%d duplicates=%d undecided=%d divergent=%d invented=%d unanswered=%d",
		r.Keys, r.Calls, r.Arrivals, strings.Join(states, " "), len(r.Unknown), len(r.Duplicates),
		len(r.Undecided), len(r.Divergent), len(r.Invented), len(r.Unanswered))
}

func abbrev(keys []string) string {
	const show = 10
	if len(keys) <= show {
		return strings.Join(keys, ", ")
	}
	return strings.Join(keys[:show], ", ") + fmt.Sprintf(", … (%d more)", len(keys)-show)
}
