// Package groupcommit configures group commit in the stores that offer it
// (sqlitestore and pgstore, as their Config.Batch): writes from concurrent
// callers that arrive within a window share one transaction, and so one
// fsync or one round trip.
package groupcommit

import "time"

// Config configures group commit. Each caller is answered only after the
// transaction holding its write has committed, so a claim is durable before
// its effect runs whether batching is on or off.
type Config struct {
	// Window is how long a batch waits, after its first write arrives, for
	// others to join it; it bounds the latency batching adds. Zero turns
	// group commit off unless Eager is set; at most [MaxWindow]. Defaults
	// to 0 (off). pgstore reads a Config with neither Window nor Eager
	// as its default, Eager (pgstore.Config.Unbatched turns it off).
	Window time.Duration

	// Eager, with Window zero, turns group commit on without a window: a
	// batch never waits for writes to join it, but takes every write that
	// queued while earlier batches were being written. A lone write goes
	// out at once, as without batching, and the batches grow with the
	// load. With a window set it is refused.
	Eager bool

	// MaxSize caps the writes in one batch; a full batch is written at once
	// without waiting for the rest of the window. At most [MaxSize].
	// Defaults to [DefaultSize] when Window is set. Set it to about the
	// number of callers writing at once: a batch that cannot fill waits out
	// the whole window (measured on SQLite with 64 callers and a 2 ms
	// window: MaxSize 128 gave 2.5 times raw's throughput, 64 gave 6.7).
	MaxSize int
}

// Limits and defaults.
const (
	DefaultSize = 128
	MaxSize     = 4096
	MaxWindow   = time.Second
)

// On reports whether group commit is enabled.
func (c Config) On() bool { return c.Window > 0 || c.Eager }
