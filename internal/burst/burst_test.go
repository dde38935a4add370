package burst

import (
	"sync"
	"testing"
)

// Every call runs, and all of them are in flight together: each waits for
// all the others to have started before returning.
func TestRunOverlapsAllCalls(t *testing.T) {
	const n = 32
	var arrived sync.WaitGroup
	arrived.Add(n)
	seen := make([]bool, n)
	Run(n, func(i int) {
		seen[i] = true
		arrived.Done()
		arrived.Wait() // returns only once all n calls are running
	})
	for i, ok := range seen {
		if !ok {
			t.Fatalf("call %d did not run", i)
		}
	}
}
