package sqlitestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/groupcommit"
	"github.com/idemkit/idem/storetest"
)

func openBatched(t testing.TB, path string, b Batch) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Config{Migrate: true, Batch: b})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceBatched runs the shared suite with group commit on:
// batching must not change any answer.
func TestConformanceBatched(t *testing.T) {
	b := Batch{Window: time.Millisecond, MaxSize: 32}
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return openBatched(t, tempPath(t), b) },
		NewPeer:  func(t *testing.T, st idem.Store) idem.Store { return openBatched(t, st.(*Store).cfg.path, b) },
	})
}

// TestConformanceBatchedEager runs the shared suite with group commit
// without a window, where a lone write skips the batcher.
func TestConformanceBatchedEager(t *testing.T) {
	b := Batch{Eager: true}
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store { return openBatched(t, tempPath(t), b) },
		NewPeer:  func(t *testing.T, st idem.Store) idem.Store { return openBatched(t, st.(*Store).cfg.path, b) },
	})
}

// TestEagerLoneWritesSkipTheBatcher: with Batch.Eager, a caller alone
// claims and finishes without the batcher (as with group commit off), and
// callers arriving together share commits.
func TestEagerLoneWritesSkipTheBatcher(t *testing.T) {
	path := tempPath(t)
	s := openBatched(t, path, Batch{Eager: true})
	for i := range 20 {
		res := mustClaim(t, s, claimParams(fmt.Sprint("lone-", i), "a"))
		mustFinish(t, s, finishParams(res.Record, idem.StateSucceeded, "ok"))
	}
	if n := s.batch.submitted.Load(); n != 0 {
		t.Fatalf("a lone caller sent %d writes through the batcher, want 0", n)
	}
	const n = 64
	version := observer(t, path)
	before := version()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			mustClaim(t, s, claimParams(fmt.Sprint("burst-", i), "a"))
		})
	}
	close(start)
	wg.Wait()
	commits, batched := version()-before, s.batch.submitted.Load()
	t.Logf("%d concurrent claims: %d commits, %d through the batcher", n, commits, batched)
	if commits > n/2 || batched < n/2 {
		t.Fatalf("%d concurrent claims took %d commits, %d through the batcher; want at most %d commits and at least %d batched: they did not share commits",
			n, commits, batched, n/2, n/2)
	}
}

func TestBatchConfigValidated(t *testing.T) {
	for _, b := range []Batch{
		{Window: -time.Millisecond},
		{Window: 2 * groupcommit.MaxWindow},
		{Window: time.Millisecond, MaxSize: -1},
		{Window: time.Millisecond, MaxSize: groupcommit.MaxSize + 1},
	} {
		if s, err := Open(context.Background(), tempPath(t), Config{Batch: b}); err == nil {
			_ = s.Close()
			t.Errorf("Open accepted %+v", b)
		}
	}
}

// TestBatchNeighbourFailure puts, into one batch with real claims, a
// request that writes a row and then fails on a CHECK constraint: its
// caller gets the error and its row is rolled back, while every neighbour
// is claimed and durable — and a stale Finish in the same batch is fenced
// as it would be alone.
func TestBatchNeighbourFailure(t *testing.T) {
	const n = 10
	path := tempPath(t)
	s := openBatched(t, path, Batch{Window: groupcommit.MaxWindow, MaxSize: n + 2})
	ctx := context.Background()
	held := mustClaim(t, s, claimParams("held", "owner"))
	version := observer(t, path)
	before := version()

	var (
		wg      sync.WaitGroup
		errs    = make([]error, n+2)
		claimed = make([]bool, n)
	)
	for i := range n {
		wg.Go(func() {
			r, err := s.Claim(ctx, claimParams(fmt.Sprint("k-", i), "a"))
			errs[i], claimed[i] = err, r.Claimed
		})
	}
	wg.Go(func() {
		errs[n] = s.batch.submit(ctx, func(ctx context.Context, o ops) error {
			if _, err := o.insertClaim(ctx, claimParams("partial", "bad")); err != nil {
				return err
			}
			_, err := o.write.ExecContext(ctx, `UPDATE idem_records SET fingerprint = x'00' WHERE key = 'partial'`)
			return err
		})
	})
	wg.Go(func() {
		stale := finishParams(held.Record, idem.StateSucceeded, "late")
		stale.AttemptID = "someone-else"
		_, errs[n+1] = s.Finish(ctx, stale)
	})
	wg.Wait()

	if errs[n] == nil {
		t.Fatal("the failing request succeeded")
	}
	if commits := version() - before; commits != 1 {
		t.Fatalf("the batch took %d commits, want 1: the requests did not share it", commits)
	}
	if _, err := s.Get(ctx, "tenant-a", "partial"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("the failing request's write survived: %v", err)
	}
	if !errors.Is(errs[n+1], idem.ErrFenced) {
		t.Errorf("stale Finish: %v, want ErrFenced", errs[n+1])
	}
	for i := range n {
		if errs[i] != nil || !claimed[i] {
			t.Errorf("neighbour %d: claimed %v, err %v", i, claimed[i], errs[i])
		} else if r := mustGet(t, s, fmt.Sprint("k-", i)); r.AttemptID != "a" {
			t.Errorf("neighbour %d: %+v", i, r)
		}
	}
}

// TestBatchOneCommitPerBatch shows claims share a commit: concurrent
// claims in one full batch advance the file's data_version once.
func TestBatchOneCommitPerBatch(t *testing.T) {
	const n = 16
	path := tempPath(t)
	s := openBatched(t, path, Batch{Window: groupcommit.MaxWindow, MaxSize: n})
	version := observer(t, path)
	before := version()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { mustClaim(t, s, claimParams(fmt.Sprint("c-", i), "a")) })
	}
	wg.Wait()
	if got := version() - before; got != 1 {
		t.Fatalf("%d claims took %d commits, want 1", n, got)
	}
}

const crashEnv = "IDEM_SQLITESTORE_CRASH_DB"

// TestBatchCrashChild is the child half of TestBatchCrash: it claims keys
// from 32 goroutines with group commit on and prints each key as soon as
// its Claim returns, until it is killed.
func TestBatchCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("child of TestBatchCrash only")
	}
	beforeCommit = func() { time.Sleep(50 * time.Millisecond) }
	s := openBatched(t, path, Batch{Window: 2 * time.Millisecond, MaxSize: 16})
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := 0; i < 100_000; i++ {
				key := fmt.Sprintf("g%d-%d", g, i)
				r, err := s.Claim(context.Background(), claimParams(key, "child-"+key))
				if err != nil || !r.Claimed {
					fmt.Fprintf(os.Stderr, "claim %s: %v %v\n", key, r.Claimed, err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Printf("ACK %s\n", key)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestBatchCrash SIGKILLs a process that claims with group commit on, in
// the middle of its batches, then reopens the file: every claim it
// acknowledged is there, and every row is a complete claim.
func TestBatchCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	path := tempPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestBatchCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const want = 400
	acked := readAcks(stdout, want, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	werr := cmd.Wait()
	if len(acked) < want {
		t.Fatalf("child acknowledged only %d claims: %v\n%s", len(acked), werr, stderr.String())
	}
	s := openAt(t, path)
	recs, err := s.List(context.Background(), idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range recs {
		have[r.Key] = true
		want := claimParams(r.Key, "child-"+r.Key)
		if r.State != idem.StateInProgress || r.Fence != 1 || r.AttemptID != want.AttemptID ||
			r.Fingerprint != want.Fingerprint || string(r.Intent) != string(want.Intent) {
			t.Errorf("half-written record: %+v", r)
		}
	}
	for k := range acked {
		if !have[k] {
			t.Errorf("acknowledged claim %s was lost", k)
		}
	}
	t.Logf("%d claims acknowledged before the kill, %d records after reopening", len(acked), len(recs))
}

// readAcks collects acknowledged keys, calling kill once it has want of
// them, and keeps reading what the child wrote before it died.
func readAcks(r io.Reader, want int, kill func()) map[string]bool {
	acked := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked[k] = true
			if len(acked) == want {
				kill()
			}
		}
	}
	return acked
}
