package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

type fee struct {
	Account string
	Cents   int64
}

func items(n int) []batch.Item[fee] {
	out := make([]batch.Item[fee], n)
	for i := range out {
		id := fmt.Sprintf("acct-%02d", i)
		out[i] = batch.Item[fee]{ID: id, Value: fee{Account: id, Cents: 250}}
	}
	return out
}

// A run crashes in the middle of an item (its effect ran, its outcome never
// reached the store, the process stopped). The re-run skips the items applied
// before the crash, applies the rest, and reports the interrupted one as
// unknown instead of charging it twice.
func TestRerunAfterCrashSkipsAppliedAndReportsUnknown(t *testing.T) {
	t.Parallel()
	mem := memstore.New()
	crash := &storetest.CrashStore{Store: mem}
	e1, err := idem.New(crash, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	charged := map[string]int{}
	ctx1, die := context.WithCancel(context.Background())
	charge := func(_ context.Context, it batch.Item[fee]) error {
		mu.Lock()
		defer mu.Unlock()
		charged[it.ID]++
		if it.ID == "acct-04" {
			crash.Crash() // nothing more reaches the store
			die()         // and the process stops taking items
		}
		return nil
	}
	job := batch.Job{Engine: e1, Name: "fees", Run: "2024-06-01"}
	rep1, _ := batch.Run(ctx1, job, items(8), charge)
	if !slices.Equal(rep1.Applied, []string{"acct-00", "acct-01", "acct-02", "acct-03"}) {
		t.Fatalf("first run applied %v", rep1.Applied)
	}
	// The re-run comes after the crashed attempt's lease.
	e2, err := idem.New(mem, idem.Config{Clock: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	job.Engine = e2
	rep2, err := batch.Run(context.Background(), job, items(8), charge)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep2.Skipped, []string{"acct-00", "acct-01", "acct-02", "acct-03"}) ||
		!slices.Equal(rep2.Unknown, []string{"acct-04"}) ||
		!slices.Equal(rep2.Applied, []string{"acct-05", "acct-06", "acct-07"}) || rep2.Done() {
		t.Fatalf("re-run report %+v", rep2)
	}
	for id, n := range charged {
		if n != 1 {
			t.Errorf("%s charged %d times", id, n)
		}
	}
	if len(charged) != 8 {
		t.Fatalf("%d accounts charged, want 8", len(charged))
	}
}

func TestFailuresMismatchAndRetryAreReported(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	var mu sync.Mutex
	fn := func(_ context.Context, it batch.Item[fee]) error {
		mu.Lock()
		runs[it.ID]++
		mu.Unlock()
		switch it.ID {
		case "acct-01":
			return errors.New("account closed")
		case "acct-02":
			return idem.Release(errors.New("rate limited"))
		}
		return nil
	}
	job := batch.Job{Engine: e, Name: "fees", Run: "2024-06-01", Concurrency: 3}
	rep, err := batch.Run(context.Background(), job, items(4), fn)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed["acct-01"] != "account closed" || rep.Retry["acct-02"] == "" || len(rep.Applied) != 2 {
		t.Fatalf("report %+v", rep)
	}
	// Same run, acct-03 now with other content: a mismatch, not a skip.
	changed := items(4)
	changed[3].Value.Cents = 999
	rep, _ = batch.Run(context.Background(), job, changed, fn)
	if !slices.Equal(rep.Mismatch, []string{"acct-03"}) || rep.Failed["acct-01"] != "account closed" {
		t.Fatalf("second report %+v", rep)
	}
	if runs["acct-01"] != 1 || runs["acct-03"] != 1 || runs["acct-02"] != 2 {
		t.Fatalf("runs %v", runs)
	}
	if k, _ := job.Key("acct:7"); k != "fees:v1:2024-06-01:acct%3A7" {
		t.Fatalf("key %q", k)
	}
}

func TestInvalidJob(t *testing.T) {
	t.Parallel()
	e, _ := idem.New(memstore.New(), idem.Config{})
	for _, j := range []batch.Job{{Name: "fees", Run: "x"}, {Engine: e, Run: "x"}, {Engine: e, Name: "fees"}, {Engine: e, Name: "bad name", Run: "x"}} {
		if _, err := batch.Run(context.Background(), j, items(1), func(context.Context, batch.Item[fee]) error { return nil }); err == nil {
			t.Errorf("job %+v accepted", j)
		}
	}
}

// The version and the scope are part of an item's identity: a completed run
// re-applies every item under version 2, and again under another scope.
func TestVersionAndScopeReapply(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := 0
	fn := func(context.Context, batch.Item[fee]) error { mu.Lock(); runs++; mu.Unlock(); return nil }
	all := []string{"acct-00", "acct-01", "acct-02"}
	run := func(job batch.Job, wantApplied, wantSkipped []string) {
		t.Helper()
		rep, err := batch.Run(context.Background(), job, items(3), fn)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Applied, wantApplied) || !slices.Equal(rep.Skipped, wantSkipped) || !rep.Done() {
			t.Fatalf("v%d scope %q: report %+v; want applied %v, skipped %v", job.Version, job.Scope, rep, wantApplied, wantSkipped)
		}
	}
	job := batch.Job{Engine: e, Name: "fees", Run: "2024-06-01"}
	run(job, all, nil)
	run(job, nil, all)
	job.Version = 2
	if k, _ := job.Key("acct-00"); k != "fees:v2:2024-06-01:acct-00" {
		t.Fatalf("v2 key %q", k)
	}
	run(job, all, nil)
	run(job, nil, all)
	job.Scope = "tenant-b"
	run(job, all, nil)
	run(job, nil, all)
	if runs != 9 {
		t.Fatalf("effects ran %d times, want 9 (three items, three identities)", runs)
	}
}

// Cancelling the context mid-run stops taking items: those not started are
// in no list of the report, and the error is the context's.
func TestCancelStopsTakingItems(t *testing.T) {
	t.Parallel()
	e, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	ran := map[string]bool{}
	fn := func(_ context.Context, it batch.Item[fee]) error {
		mu.Lock()
		defer mu.Unlock()
		ran[it.ID] = true
		if it.ID == "acct-02" {
			cancel()
		}
		return nil
	}
	rep, err := batch.Run(ctx, batch.Job{Engine: e, Name: "fees", Run: "2024-06-01"}, items(6), fn)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if rep == nil {
		t.Fatal("no report")
	}
	if len(rep.Applied) < 2 || !slices.Equal(rep.Applied[:2], []string{"acct-00", "acct-01"}) {
		t.Fatalf("applied %v, want acct-00 and acct-01 first", rep.Applied)
	}
	for _, id := range []string{"acct-03", "acct-04", "acct-05"} {
		if ran[id] {
			t.Errorf("%s ran after the cancel", id)
		}
		_, failed := rep.Failed[id]
		_, retry := rep.Retry[id]
		if slices.Contains(rep.Applied, id) || slices.Contains(rep.Skipped, id) || slices.Contains(rep.Unknown, id) ||
			slices.Contains(rep.Mismatch, id) || failed || retry {
			t.Errorf("%s, never started, is in the report %+v", id, rep)
		}
	}
}
