package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// rawStore is the raw driver doing the minimal statements of an idempotent
// request on a scratch table shaped like idem's.
type rawStore interface {
	// insert writes an in_progress row for key if none exists and reports
	// whether it did (INSERT … ON CONFLICT DO NOTHING, SET NX).
	insert(ctx context.Context, key string) (bool, error)
	// update records the outcome of key (UPDATE, HSET).
	update(ctx context.Context, key string, result []byte) error
	// read fetches key's row by primary key (SELECT, HGETALL) and reports
	// whether there was one.
	read(ctx context.Context, key string) (bool, error)
	close() error
}

// target is one store under test: where idem's store is opened, the raw
// baseline beside it, and how to clean both up.
type target struct {
	scheme string
	// idemDSN opens idem's store on its scratch table or prefix.
	idemDSN string
	raw     rawStore
	// durability describes the server's durability settings, as read from
	// the server itself.
	durability string
	// durabilityNote, when the settings let an acknowledged write be lost
	// in a crash, says what could be lost (see durability.go).
	durabilityNote string
	// cleanup drops everything the bench created (both sides).
	cleanup func(ctx context.Context) error
	// footprint, when set, measures what both sides hold (bytes per
	// record, HOT updates); it runs once idem's store is closed.
	footprint footprinter
	// prefill, when set, loads terminal records into both sides
	// (--prefill).
	prefill prefiller
	// meter, when set, reads each side's statements, server CPU and WAL
	// around its slices of a cell.
	meter meter
	// pgTracer, on PostgreSQL, counts the statements of idem's store.
	pgTracer *stmtCounter
}

// rawRow is what the raw side writes, mirroring a record's columns.
var (
	benchScope       = "bench"
	benchFingerprint = sha256.Sum256([]byte("idem bench request"))
	benchAttempt     = strings.Repeat("a", 32) // same length as idem's attempt ids
	// pgBenchAttempt is benchAttempt as pgstore's table keeps an engine
	// attempt id (migration 0003): a tag byte 1, then the 16 bytes the hex
	// digits spell. The prefill writes it into idem's table directly, and
	// the replays read it back through the store, which refuses anything
	// else as a malformed attempt id.
	pgBenchAttempt = append([]byte{1}, bytes.Repeat([]byte{0xaa}, 16)...)
)

func nowMicros() int64 { return time.Now().UnixMicro() }

// scratchPrefix starts every scratch table, schema and key prefix the bench
// creates. Tests set their own so that they can check their own leftovers
// while other bench runs share the server.
var scratchPrefix = "idem_bench_"

// scratchName returns a fresh name for the bench's tables and prefixes.
func scratchName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return scratchPrefix + hex.EncodeToString(b[:])
}

// openTarget parses dsn, points idem's store at a scratch table or prefix,
// and opens the raw baseline on the same server.
func openTarget(ctx context.Context, dsn string) (*target, error) {
	d, err := storeopen.Parse(dsn)
	if err != nil {
		return nil, err
	}
	name := scratchName()
	var t *target
	switch d.Scheme {
	case "memory":
		t, err = &target{idemDSN: dsn, raw: newMemRaw(), durability: "none (process memory)",
			cleanup: func(context.Context) error { return nil }}, nil
	case "sqlite":
		t, err = openSQLiteTarget(ctx, d, name)
	case "mysql":
		t, err = openMySQLTarget(ctx, d, name)
	case "redis", "rediss", "redis+cluster", "redis+sentinel":
		t, err = openRedisTarget(ctx, d, name)
	case "postgres", "postgresql":
		t, err = openPostgresTarget(ctx, d, name)
	case "dynamodb":
		t, err = openDynamoTarget(ctx, d, name)
	case "nats":
		t, err = openNATSTarget(ctx, d, strings.ReplaceAll(name, "_", "-"))
	default:
		err = fmt.Errorf("the bench has no raw baseline for %s:// yet", d.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", d.Redacted(), err)
	}
	t.scheme = d.Scheme
	return t, nil
}

// withQuery returns raw (a URL-shaped DSN) with the query parameter set.
func withQuery(raw, key, value string) string {
	base, q, _ := strings.Cut(raw, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		vals = url.Values{}
	}
	vals.Set(key, value)
	return base + "?" + vals.Encode()
}

// storeOptions returns the DSN's query parameters (a store option such as a
// group-commit window is written there), minus credentials, for the header.
func storeOptions(dsn string) string {
	_, q, ok := strings.Cut(dsn, "?")
	if !ok {
		return ""
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return "(unparsable query)"
	}
	var parts []string
	for k, v := range vals {
		switch strings.ToLower(k) {
		case "password", "pass", "sslpassword", "sslkey":
			continue
		}
		parts = append(parts, k+"="+strings.Join(v, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
