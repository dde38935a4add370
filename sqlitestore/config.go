package sqlitestore

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/groupcommit"
	"github.com/idemkit/idem/storekit/commitqueue"
)

// Config configures [Open]. The zero value of every field selects its
// default.
type Config struct {
	// path is Open's database file.
	path string

	// Synchronous is SQLite's synchronous setting for the writer: "FULL"
	// fsyncs the WAL on every commit, so a claim survives power loss before
	// its effect runs. "NORMAL" is faster but a commit acknowledged just
	// before a power cut may be lost, and with it a claim whose effect
	// already ran; a duplicate could then run the effect again. "EXTRA" is
	// also accepted; "OFF" is refused. Defaults to "FULL".
	Synchronous string

	// BusyTimeout is how long a connection waits for a lock held by another
	// connection or process before failing. Defaults to 5s.
	BusyTimeout time.Duration

	// ReadConns is the size of the read-only connection pool used for Get,
	// List and the replay check of Claim. Defaults to 4.
	ReadConns int

	// Migrate applies the embedded migrations during Open. Without it the
	// schema must already be in place (see [Store.Migrate] and
	// [MigrationsScript]). Defaults to false.
	Migrate bool

	// Batch turns on group commit: claims and outcomes from concurrent
	// callers within Batch.Window are written by the one writer in a single
	// transaction, hence a single fsync (see the package documentation).
	// Defaults to the zero Batch: off, every write is its own commit.
	Batch Batch
}

// Batch is [groupcommit.Config]: the window and batch size of group commit.
type Batch = groupcommit.Config

// Defaults.
const (
	DefaultSynchronous = "FULL"
	DefaultBusyTimeout = 5 * time.Second
	DefaultReadConns   = 4
)

// withDefaults validates c and fills in defaults. Errors name the field.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.path == "":
		return c, fmt.Errorf("sqlitestore: path: empty; name a database file")
	case c.path == ":memory:" || strings.HasPrefix(c.path, "file:"):
		return c, fmt.Errorf("sqlitestore: path: %q is not a plain file path; the writer and readers must share one file", c.path)
	case strings.ContainsRune(c.path, '?'):
		return c, fmt.Errorf("sqlitestore: path: %q contains '?'", c.path)
	}
	sync, err := parseSynchronous(c.Synchronous)
	if err != nil {
		return c, err
	}
	c.Synchronous = sync
	switch {
	case c.BusyTimeout < 0:
		return c, fmt.Errorf("sqlitestore: Config.BusyTimeout: %s is negative", c.BusyTimeout)
	case c.BusyTimeout == 0:
		c.BusyTimeout = DefaultBusyTimeout
	}
	switch {
	case c.ReadConns < 0:
		return c, fmt.Errorf("sqlitestore: Config.ReadConns: %d is negative", c.ReadConns)
	case c.ReadConns == 0:
		c.ReadConns = DefaultReadConns
	}
	c.Batch, err = commitqueue.Defaults("sqlitestore", c.Batch)
	return c, err
}

func parseSynchronous(s string) (string, error) {
	switch u := strings.ToUpper(s); u {
	case "":
		return DefaultSynchronous, nil
	case "FULL", "NORMAL", "EXTRA":
		return u, nil
	case "OFF":
		return "", fmt.Errorf("sqlitestore: Config.Synchronous: OFF is refused: a claim must be durable before its effect runs")
	default:
		return "", fmt.Errorf("sqlitestore: Config.Synchronous: %q is not FULL, NORMAL or EXTRA", s)
	}
}

// writerDSN opens the single writer: WAL, the chosen synchronous level, and
// BEGIN IMMEDIATE for every transaction so that a write transaction takes
// the write lock up front (waiting under busy_timeout) instead of failing
// with SQLITE_BUSY when it upgrades from a read.
func (c Config) writerDSN() string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+c.busyMillis()+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+c.Synchronous+")")
	q.Set("_txlock", "immediate")
	return c.path + "?" + q.Encode()
}

// readerDSN opens a read-only connection (query_only): it can never take
// the write lock, so readers never queue behind the writer.
func (c Config) readerDSN() string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+c.busyMillis()+")")
	q.Add("_pragma", "query_only(1)")
	return c.path + "?" + q.Encode()
}

func (c Config) busyMillis() string {
	ms := c.BusyTimeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}
