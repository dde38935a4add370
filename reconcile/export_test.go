package reconcile

import "time"

// SetProgressAfter makes the command print progress lines after d; it
// returns a function restoring the default.
func SetProgressAfter(d time.Duration) (restore func()) {
	old := progressAfter
	progressAfter = d
	return func() { progressAfter = old }
}
