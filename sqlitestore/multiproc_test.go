package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	childEnv  = "IDEM_SQLITESTORE_CHILD_DB"
	multiKeys = 40
)

// claimAll claims every key once as attempt, in reverse order if reverse,
// and returns the keys it won.
func claimAll(t testing.TB, s *Store, attempt string, reverse bool) []int {
	var won []int
	for i := range multiKeys {
		k := i
		if reverse {
			k = multiKeys - 1 - i
		}
		r, err := s.Claim(context.Background(), claimParams("multi-"+strconv.Itoa(k), attempt))
		if err != nil {
			t.Fatalf("claim %d: %v", k, err)
		}
		if r.Claimed {
			won = append(won, k)
		}
	}
	return won
}

// Two Store values on one file (two writer connections, as two processes
// would have) never both win a key.
func TestTwoHandlesOneFile(t *testing.T) {
	path := tempPath(t)
	a, b := openAt(t, path), openAt(t, path)
	wins := make([]int, multiKeys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			won := claimAll(t, s, fmt.Sprintf("handle-%d", i), i%2 == 1)
			mu.Lock()
			defer mu.Unlock()
			for _, k := range won {
				wins[k]++
			}
		})
	}
	wg.Wait()
	for k, n := range wins {
		if n != 1 {
			t.Errorf("key %d won %d times across handles, want 1", k, n)
		}
	}
}

// TestChildProcess is the child half of TestTwoProcesses; it does nothing
// unless started by it.
func TestChildProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("child of TestTwoProcesses only")
	}
	s, err := Open(context.Background(), path, Config{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range claimAll(t, s, "child", true) {
		fmt.Printf("WON %d\n", k)
	}
}

// A second process claims the same keys on the same file at the same time
// (both also race to migrate): each key is won exactly once.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	path := tempPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path)
	wins := make([]int, multiKeys)
	parentWon := claimAll(t, s, "parent", false)
	for _, k := range parentWon {
		wins[k]++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, ok := strings.CutPrefix(line, "WON "); ok {
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= multiKeys {
				t.Fatalf("child said %q", line)
			}
			wins[n]++
		}
	}
	for k, n := range wins {
		if n != 1 {
			t.Errorf("key %d won %d times across processes, want 1", k, n)
		}
	}
	t.Logf("parent won %d keys, child %d", len(parentWon), multiKeys-len(parentWon))
}
