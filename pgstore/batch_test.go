package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/groupcommit"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

func TestBatchConfigValidated(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	for _, b := range []pgstore.Batch{
		{Window: -time.Millisecond},
		{Window: 2 * groupcommit.MaxWindow},
		{Window: time.Millisecond, MaxSize: -1},
		{Window: time.Millisecond, MaxSize: groupcommit.MaxSize + 1},
	} {
		if s, err := pgstore.New(context.Background(), pool, pgstore.Config{Batch: b}); err == nil {
			s.Close()
			t.Errorf("New accepted %+v", b)
		}
	}
}

// TestBatchDefault: the zero Config is the eager group commit with
// outcomes batched (what the idem CLI runs), and concurrent callers share
// its transactions; Unbatched turns it off and takes no batch settings; a
// Batch with a window or Eager keeps BatchFinishes as given.
func TestBatchDefault(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	for _, tc := range []struct {
		name     string
		cfg      pgstore.Config
		on       bool
		finishes bool
		size     int
		crowd    bool // also check what 64 concurrent claims go through
	}{
		{"zero Config", pgstore.Config{}, true, true, groupcommit.DefaultSize, true},
		{"MaxSize only", pgstore.Config{Batch: pgstore.Batch{MaxSize: 8}}, true, true, 8, false},
		{"Eager, claims only", pgstore.Config{Batch: pgstore.Batch{Eager: true}}, true, false, groupcommit.DefaultSize, false},
		{"window", pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond}}, true, false, groupcommit.DefaultSize, false},
		{"Unbatched", pgstore.Config{Unbatched: true}, false, false, 0, true},
	} {
		tc.cfg.Schema = freshSchema(t, pool)
		tc.cfg.Migrate = true
		s, err := pgstore.New(context.Background(), pool, tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		defer s.Close()
		b, finishes, on := s.GroupCommit()
		if on != tc.on || finishes != tc.finishes || (on && b.MaxSize != tc.size) || (on && b.Window == 0 && !b.Eager) {
			t.Errorf("%s: group commit on %v (%+v), outcomes batched %v; want on %v, outcomes %v, MaxSize %d",
				tc.name, on, b, finishes, tc.on, tc.finishes, tc.size)
		}
		if !tc.crowd {
			continue
		}
		claimAtOnce(t, s, "crowd-", 64)
		if got, _ := s.BatchStats(); (got > 0) != tc.on {
			t.Errorf("%s: %d writes of 64 concurrent claims went through the group commit", tc.name, got)
		}
	}
	for _, cfg := range []pgstore.Config{
		{Unbatched: true, Batch: pgstore.Batch{Eager: true}},
		{Unbatched: true, Batch: pgstore.Batch{Window: time.Millisecond}},
		{Unbatched: true, Batch: pgstore.Batch{MaxSize: 8}},
		{Unbatched: true, BatchFinishes: true},
	} {
		if s, err := pgstore.New(context.Background(), pool, cfg); err == nil {
			s.Close()
			t.Errorf("New accepted %+v", cfg)
		}
	}
}

// TestBatchNeighbourFailure puts a statement that fails (a key PostgreSQL
// cannot store) into one batch with good claims and a fenced
// Finish: the failure aborts the batch's transaction, yet only its own
// caller sees an error; the others are claimed (and durable) or fenced
// exactly as without batching.
func TestBatchNeighbourFailure(t *testing.T) {
	t.Parallel()
	const n = 12
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: groupcommit.MaxWindow, MaxSize: n + 2}, BatchFinishes: true})
	ctx := context.Background()
	held := mustClaim(t, s, claimParams("held", "owner", t0))

	errs := make([]error, n+2)
	claimed := make([]bool, n+2)
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Go(func() {
			p := claimParams(fmt.Sprint("k-", i), "a", t0)
			if i == n {
				p.Key = "bad\x00key" // text cannot hold NUL: the statement fails
			}
			c, err := s.Claim(ctx, p)
			errs[i], claimed[i] = err, c.Claimed
		})
	}
	wg.Go(func() {
		stale := succeed(held, "late", t0, time.Hour)
		stale.AttemptID = "someone-else"
		_, errs[n+1] = s.Finish(ctx, stale)
	})
	wg.Wait()

	if s.BatchFallbacks() == 0 {
		t.Fatal("the failing statement never shared a batch: nothing was tested")
	}
	if errs[n] == nil {
		t.Error("the bad claim succeeded")
	}
	if !errors.Is(errs[n+1], idem.ErrFenced) {
		t.Errorf("stale Finish: %v, want ErrFenced", errs[n+1])
	}
	for i := range n {
		if errs[i] != nil || !claimed[i] {
			t.Errorf("neighbour %d: claimed %v, err %v", i, claimed[i], errs[i])
			continue
		}
		if r, err := s.Get(ctx, "tenant-1", fmt.Sprint("k-", i)); err != nil || r.AttemptID != "a" {
			t.Errorf("neighbour %d not recorded: %v", i, err)
		}
	}
}

// A gathered batch larger than pgstore.MaxTxWrites is written as several
// transactions of at most that many writes (which keeps outcomes HOT; see
// TestFirstTimeFinishIsHOTBatched), and every claim in it is still
// answered and recorded.
func TestBatchSplitsTransactions(t *testing.T) {
	t.Parallel()
	const n = 13
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: groupcommit.MaxWindow, MaxSize: n}})
	ctx := context.Background()
	claimAtOnce(t, s, "split-", n)
	recs, err := s.List(ctx, idem.ListFilter{})
	if err != nil || len(recs) != n {
		t.Fatalf("%d records, %v; want %d", len(recs), err, n)
	}
	submitted, largest := s.BatchStats()
	if submitted != n {
		t.Fatalf("%d writes batched, want %d", submitted, n)
	}
	if largest > pgstore.MaxTxWrites || largest < 2 {
		t.Fatalf("the largest batch transaction held %d writes, want 2 to %d", largest, pgstore.MaxTxWrites)
	}
}

// Outcomes are batched only with Config.BatchFinishes: by default a Finish
// is its own statement even while claims are batched.
func TestBatchFinishesOptIn(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: time.Millisecond}, BatchFinishes: on})
		c := mustClaim(t, s, claimParams("k", "a", t0))
		mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
		want := int64(1)
		if on {
			want = 2
		}
		if got, _ := s.BatchStats(); got != want {
			t.Errorf("BatchFinishes %v: %d writes batched, want %d", on, got, want)
		}
	}
}

const (
	crashEnv     = "IDEM_PGSTORE_CRASH_SCHEMA"
	crashModeEnv = "IDEM_PGSTORE_CRASH_MODE" // "window", or the default group commit
)

// TestBatchCrashChild is the child half of TestBatchCrash: it claims keys
// from 32 goroutines with group commit on and prints each key as soon as
// its Claim returns, until it is killed.
func TestBatchCrashChild(t *testing.T) {
	schema := os.Getenv(crashEnv)
	if schema == "" {
		t.Skip("child of TestBatchCrash only")
	}
	cfg := pgstore.Config{Schema: schema} // the default: eager, callers write the batches
	if os.Getenv(crashModeEnv) == "window" {
		cfg.Batch = pgstore.Batch{Window: 2 * time.Millisecond, MaxSize: 16}
	}
	s, err := pgstore.Open(context.Background(), testenv.Postgres.Need(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := 0; i < 100_000; i++ {
				key := fmt.Sprintf("g%d-%d", g, i)
				c, err := s.Claim(context.Background(), claimParams(key, "child-"+key, t0))
				if err != nil || !c.Claimed {
					fmt.Fprintf(os.Stderr, "claim %s: %v %v\n", key, c.Claimed, err)
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

// TestBatchCrash kills a process that claims with group commit on, in the
// middle of its batches: every claim it acknowledged is in the table, and
// every row there is a complete claim (nothing half-written). With a
// window, and with the default eager group commit, whose batches the
// claiming callers write themselves.
func TestBatchCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, mode := range []string{"window", "default"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			batchCrash(t, mode)
		})
	}
}

func batchCrash(t *testing.T, mode string) {
	s := newStore(t, pgstore.Config{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestBatchCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+s.Schema(), crashModeEnv+"="+mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := readAcks(stdout, 400, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	werr := cmd.Wait()
	if len(acked) < 400 {
		t.Fatalf("child acknowledged only %d claims: %v\n%s", len(acked), werr, stderr.String())
	}
	checkCrashRecords(t, s, acked)
}

// readAcks collects acknowledged keys, calling kill once it has want of
// them, and keeps reading what the child flushed before it died.
func readAcks(r interface{ Read([]byte) (int, error) }, want int, kill func()) map[string]bool {
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

func checkCrashRecords(t *testing.T, s *pgstore.Store, acked map[string]bool) {
	t.Helper()
	recs, err := s.List(context.Background(), idem.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range recs {
		have[r.Key] = true
		if r.State != idem.StateInProgress || r.Fence != 1 || r.AttemptID != "child-"+r.Key ||
			r.Fingerprint != idem.NewFingerprint([]byte(r.Key)) || !r.CreatedAt.Equal(t0) {
			t.Errorf("half-written or foreign record: %+v", r)
		}
	}
	for k := range acked {
		if !have[k] {
			t.Errorf("acknowledged claim %s was lost", k)
		}
	}
	t.Logf("%d claims acknowledged before the kill, %d records found", len(acked), len(recs))
}

// TestBatchEagerLoneWriteGoesAlone: without a window, a write that finds
// the batcher idle is sent as a plain statement (a batch of one would only
// add a BEGIN, a COMMIT and two hand-offs), while writes from many callers
// at once still share transactions.
func TestBatchEagerLoneWriteGoesAlone(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Eager: true, MaxSize: 32}})
	for i := range 5 {
		c := mustClaim(t, s, claimParams(fmt.Sprint("alone-", i), "a", t0))
		mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
	}
	if got, _ := s.BatchStats(); got != 0 {
		t.Fatalf("%d lone writes went through the batcher, want 0", got)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 20 {
				c := mustClaim(t, s, claimParams(fmt.Sprint("crowd-", i, "-", j), "a", t0))
				mustFinish(t, s, succeed(c, "ok", t0, time.Hour))
			}
		})
	}
	wg.Wait()
	if got, largest := s.BatchStats(); got == 0 || largest < 2 {
		t.Fatalf("64 callers: %d writes batched, largest transaction %d; want some sharing", got, largest)
	}
}

// TestBatchCommitFailureIsReported: a batch whose statements all succeed
// but whose commit fails (here a deferred constraint trigger that refuses
// one key at commit) acknowledges none of its claims: every claim that
// returned Claimed is in the table, the refused key's claim failed, and
// nothing of its transaction was written.
func TestBatchCommitFailureIsReported(t *testing.T) {
	t.Parallel()
	const n = 8
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Window: groupcommit.MaxWindow, MaxSize: n}})
	ctx := context.Background()
	pool := testPool(t)
	fn := pgx.Identifier{s.Schema(), "refuse_doomed"}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.key = 'doomed' THEN RAISE EXCEPTION 'refused at commit'; END IF;
	RETURN NULL;
END $$`,
		`CREATE CONSTRAINT TRIGGER refuse_doomed AFTER INSERT ON ` + pgx.Identifier{s.Schema(), "idem_records"}.Sanitize() +
			` DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"doomed"}
	for i := range n - 1 {
		keys = append(keys, fmt.Sprint("k-", i))
	}
	claimed := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			p := claimParams(k, "a", t0)
			c, err := s.Claim(ctx, p)
			claimed[i], errs[i] = c.Claimed, err
		})
	}
	wg.Wait()
	if errs[0] == nil {
		t.Fatalf("the claim refused at commit returned no error (claimed %v)", claimed[0])
	}
	failed := 0
	for i, k := range keys {
		_, err := s.Get(ctx, "tenant-1", k)
		switch {
		case claimed[i] && err != nil:
			t.Errorf("claim %q acknowledged but not in the table: %v", k, err)
		case errs[i] != nil && err == nil:
			t.Errorf("claim %q failed but its row was written", k)
		case errs[i] != nil:
			failed++
		}
	}
	if failed < 2 {
		t.Fatalf("only %d claims failed: the refused key shared no transaction, nothing was tested", failed)
	}
}

// TestBatchEagerLeaderLeaves: in the eager group commit a caller writes
// the batch handed to it; one whose context ended once its request was
// taken into a batch still has that batch written (by a goroutine of its
// own), so the callers who stayed get their answers. Half the callers
// here give up after a few hundred microseconds; every claim of the
// others must succeed.
func TestBatchEagerLeaderLeaves(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Eager: true}, BatchFinishes: true})
	pgstore.ForceInsertFirst(s)
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for i := range 60 {
				key := fmt.Sprint("leaves-", g, "-", i)
				if g%2 == 1 {
					cctx, cancel := context.WithTimeout(ctx, time.Duration(50+(g*37+i*53)%400)*time.Microsecond)
					_, _ = s.Claim(cctx, claimParams(key, "a", t0))
					cancel()
					continue
				}
				c, err := s.Claim(ctx, claimParams(key, "a", t0))
				if err != nil || !c.Claimed {
					failed.Add(1)
					t.Errorf("claim %s of a caller that stayed: %+v, %v", key, c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("orphan batches written: %d", s.OrphanBatches())
}

// TestBatchEagerBurstAllWritten: a burst of one-shot callers, far more
// than the batches in flight can hold, all get their claims written: the
// callers left in line when no new caller comes are handed their batches
// by the callers before them.
func TestBatchEagerBurstAllWritten(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgstore.Config{Batch: pgstore.Batch{Eager: true}, CallTimeout: 5 * time.Second})
	pgstore.ForceInsertFirst(s)
	const n = 200
	claimAtOnce(t, s, "burst-", n)
	if submitted, largest := s.BatchStats(); submitted < n/2 || largest < 2 {
		t.Fatalf("%d of %d claims batched, largest transaction %d: the burst did not queue", submitted, n, largest)
	}
}

// claimAtOnce claims the keys prefix0 … prefix<n-1> from n goroutines at
// once and reports each claim that failed or was not Claimed.
func claimAtOnce(t *testing.T, s *pgstore.Store, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c, err := s.Claim(context.Background(), claimParams(fmt.Sprint(prefix, i), "a", t0))
			if err == nil && !c.Claimed {
				err = errors.New("not claimed")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %s%d: %v", prefix, i, err)
		}
	}
}
