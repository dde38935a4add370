package history

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// clean is a history the checker must accept: k1 answered first, then
// replayed; k2's first call timed out and its retry replayed; k3 was
// refused while the store was down and then answered.
func clean() (*History, Facts) {
	var h History
	h.Invoke("k1")
	h.OK("k1", 201, []byte(`{"id":1}`), false)
	h.Invoke("k1")
	h.OK("k1", 201, []byte(`{"id":1}`), true)
	h.Invoke("k2")
	h.Indeterminate("k2", 0, "client timeout")
	h.Invoke("k2")
	h.OK("k2", 201, []byte(`{"id":2}`), true)
	h.Invoke("k3")
	h.Fail("k3", 503, "store-unavailable")
	h.Invoke("k3")
	h.OK("k3", 500, []byte(`boom`), false)
	f := Facts{
		Arrivals:  map[string]int{"k1": 1, "k2": 1, "k3": 1},
		Completed: map[string]Answer{"k1": {201, []byte(`{"id":1}`)}, "k2": {201, []byte(`{"id":2}`)}, "k3": {500, []byte(`boom`)}},
		States:    map[string]string{"k1": "succeeded", "k2": "succeeded", "k3": "succeeded"},
	}
	return &h, f
}

func TestCleanHistoryPasses(t *testing.T) {
	h, f := clean()
	r := Check(h.Ops(), f)
	if err := r.Err(); err != nil {
		t.Fatalf("clean history flagged: %v", err)
	}
	if r.Keys != 3 || r.Calls != 6 || r.Arrivals != 3 || r.States["succeeded"] != 3 || len(r.Unanswered) != 0 {
		t.Fatalf("counts: %s", r)
	}
}

func TestCheckerFlagsDuplicate(t *testing.T) {
	h, f := clean()
	f.Arrivals["k2"] = 2 // the retry ran the effect again
	r := Check(h.Ops(), f)
	if !slices.Equal(r.Duplicates, []string{"k2"}) || r.Err() == nil || !strings.Contains(r.Err().Error(), "more than once") {
		t.Fatalf("duplicate not flagged: %s / %v", r, r.Err())
	}
}

func TestCheckerFlagsUnknown(t *testing.T) {
	for _, st := range []string{"unknown", "in_progress", ""} {
		h, f := clean()
		if st == "" {
			delete(f.States, "k2") // the record is gone
		} else {
			f.States["k2"] = st
		}
		r := Check(h.Ops(), f)
		if !slices.Equal(r.Undecided, []string{"k2"}) || r.Err() == nil {
			t.Fatalf("state %q of a completed call not flagged: %s / %v", st, r, r.Err())
		}
		if st == "unknown" && !slices.Equal(r.Unknown, []string{"k2"}) {
			t.Fatalf("unknown not counted: %s", r)
		}
	}
	// An unknown record whose upstream call never completed is not a
	// violation (it is genuinely unknown), but it is counted.
	var h History
	h.Invoke("stall")
	h.Indeterminate("stall", 504, "upstream-timeout")
	r := Check(h.Ops(), Facts{Arrivals: map[string]int{"stall": 1}, States: map[string]string{"stall": "unknown"}})
	if r.Err() != nil || !slices.Equal(r.Unknown, []string{"stall"}) || !slices.Equal(r.Unanswered, []string{"stall"}) {
		t.Fatalf("genuine unknown: %s / %v", r, r.Err())
	}
}

func TestCheckerFlagsDivergentAnswers(t *testing.T) {
	h, f := clean()
	h.Invoke("k1")
	h.OK("k1", 201, []byte(`{"id":1} `), true) // one byte more
	r := Check(h.Ops(), f)
	if !slices.Equal(r.Divergent, []string{"k1"}) || r.Err() == nil {
		t.Fatalf("divergent replay not flagged: %s", r)
	}
	// The first complete answer differs from what the upstream sent.
	h, f = clean()
	f.Completed["k2"] = Answer{201, []byte(`{"id":22}`)}
	if r := Check(h.Ops(), f); !slices.Equal(r.Divergent, []string{"k2"}) {
		t.Fatalf("answer unlike the upstream's not flagged: %s", r)
	}
}

func TestCheckerFlagsInventedAnswer(t *testing.T) {
	h, f := clean()
	h.Invoke("k4")
	h.OK("k4", 201, []byte(`{}`), true)
	r := Check(h.Ops(), f)
	if !slices.Equal(r.Invented, []string{"k4"}) || r.Err() == nil {
		t.Fatalf("answer without an upstream arrival not flagged: %s", r)
	}
}

func Example() {
	var h History
	h.Invoke("order-1")
	h.Indeterminate("order-1", 0, "client timeout") // gave up after 1 s
	h.Invoke("order-1")
	h.OK("order-1", 201, []byte(`{"paid":true}`), true) // the retry replays
	r := Check(h.Ops(), Facts{
		Arrivals:  map[string]int{"order-1": 1},
		Completed: map[string]Answer{"order-1": {201, []byte(`{"paid":true}`)}},
		States:    map[string]string{"order-1": "succeeded"},
	})
	fmt.Println(r)
	fmt.Println(r.Err())
	// Output:
	// keys=1 calls=2 upstream_arrivals=1 states[succeeded=1] unknown=0 duplicates=0 undecided=0 divergent=0 invented=0 unanswered=0
	// <nil>
}
