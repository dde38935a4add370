// Package burst sends work at once: the concurrency probes of idemtest and
// idem audit start n calls together so that they overlap.
package burst

import "sync"

// Run calls f(0), …, f(n-1), each on its own goroutine, all released at
// the same moment, and returns when every call has returned.
func Run(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			start.Wait()
			f(i)
		}()
	}
	start.Done()
	done.Wait()
}
