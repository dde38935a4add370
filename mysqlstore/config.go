package mysqlstore

import (
	"fmt"
	"regexp"
	"time"
)

// DefaultTable is the records table used when Config.Table is empty.
const DefaultTable = "idem_records"

// maxTableLen leaves room for the "_migrations" suffix inside MySQL's
// 64-character identifier limit.
const maxTableLen = 64 - len(migrationsSuffix)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Config configures a [Store].
type Config struct {
	// Table is the name of the records table, an unquoted identifier of
	// letters, digits and '_' (at most 53 characters). The migrations table
	// is named Table + "_migrations". Defaults to "idem_records".
	Table string
	// Migrate applies the embedded migrations when the store is opened.
	// Defaults to false: run `idem migrate` or [Store.Migrate] instead.
	Migrate bool
	// MaxOpenConns caps the connections of the pool [Open] creates, so a
	// burst of callers queues in the pool rather than exceeding the
	// server's max_connections ("Error 1040: Too many connections"). A
	// negative value means no cap. [New] ignores it: the caller configures
	// its own pool. Defaults to 32.
	MaxOpenConns int
	// CallTimeout bounds each store call — a claim, an outcome, a
	// release, a heartbeat, a decision, a mark, a read, a page of List (one
	// with a Limit), a batch of Sweep — from the moment it starts,
	// whatever the caller's context says (an earlier deadline of the
	// caller's still wins): a server that stops answering without closing
	// the connection fails the call with a timeout, which the engine
	// reports as store unavailable (503) before any effect runs. For a
	// server-side bound as well, add max_statement_time=SECONDS (MariaDB)
	// or max_execution_time=MILLISECONDS (MySQL, reads only) to the DSN:
	// the driver sets them on every session. Negative: no bound. Defaults
	// to 10s.
	CallTimeout time.Duration
}

// DefaultMaxOpenConns is Config.MaxOpenConns's default.
const DefaultMaxOpenConns = 32

// DefaultCallTimeout is Config.CallTimeout's default.
const DefaultCallTimeout = 10 * time.Second

// withDefaults returns c with defaults filled in, or an error naming the
// invalid field.
func (c Config) withDefaults() (Config, error) {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = DefaultMaxOpenConns
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if err := validateTable(c.Table); err != nil {
		return c, err
	}
	return c, nil
}

func validateTable(table string) error {
	if len(table) > maxTableLen {
		return fmt.Errorf("mysqlstore: Config.Table %q is longer than %d characters", table, maxTableLen)
	}
	if !tableName.MatchString(table) {
		return fmt.Errorf("mysqlstore: Config.Table %q must be letters, digits and '_', not starting with a digit", table)
	}
	return nil
}
