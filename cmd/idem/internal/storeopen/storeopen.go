// Package storeopen turns a store DSN, as written on the idem command line,
// into an [idem.Store].
//
// A DSN is SCHEME://REST. Each scheme is one entry in a small table
// (schemes.go): how to open it, how to migrate it and how to print its
// migrations. Adding a backend is adding one entry.
//
//	sqlite://PATH         embedded SQLite file (relative or absolute path)
//	postgres://…          PostgreSQL URL, passed to pgx as written
//	postgresql://…        the same
//	mysql://…             MySQL or MariaDB (mysql.go)
//	redis://…, rediss://… Redis; redis+cluster://host:port,… a Redis Cluster;
//	                      redis+sentinel://host:port,…/db?master=NAME a primary
//	                      behind Sentinel (redis.go)
//	nats://host:port[,…]/BUCKET  a NATS JetStream key-value bucket (nats.go)
//	memory://             in-process memory store (lost on exit)
//	dynamodb://TABLE?region=… Amazon DynamoDB table (dynamodb.go)
//
// The SQL stores take group commit from the query: batch=2ms sets the batch
// window (absent or 0: off), batch_size=128 the most writes per batch.
// sqlite:// also takes sync=full (the default) or sync=normal (faster, less
// durable: a power cut may lose the last acknowledged claims); postgres://
// takes schema=NAME and notify=false (no LISTEN/NOTIFY, for CockroachDB and
// YugabyteDB). idem removes its own parameters before pgx sees the URL.
//
// redis://, rediss://, redis+cluster://host:port,host:port and
// redis+sentinel://host:port,…?master=NAME take prefix=NAME, pipeline=off
// (redisstore.Config.Unpipelined: each claim and outcome sent alone) and, to make
// each claim durable on the replicas before its effect runs,
// wait_replicas=all (or a count), min_replicas=N, wait_aof_local=1,
// wait_aof_replicas=N and wait_timeout=DURATION; redis+cluster:// takes
// cluster_refresh=DURATION (see redis.go); the rest of the query goes to
// go-redis. mysql:// takes table=NAME; the rest goes to the driver.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/idemkit/idem"

	"github.com/jackc/pgx/v5"
)

// Default is the DSN used when none is given: a SQLite file in the working
// directory.
const Default = "sqlite://idem.db"

// ErrNotAvailable reports a scheme that is recognised but whose backend is
// not built into this binary.
var ErrNotAvailable = errors.New("storeopen: store backend not available in this build")

// ErrNoSchema reports a store that keeps no SQL schema (memory, Redis):
// there is nothing to migrate and no SQL to print.
var ErrNoSchema = errors.New("the store keeps no SQL schema")

// DSN is a parsed store DSN.
type DSN struct {
	// Scheme is the lower-cased scheme, without "://".
	Scheme string
	// Target is everything after "SCHEME://": a file path for sqlite, the
	// whole URL for postgres (see Raw), empty for memory.
	Target string
	// Raw is the DSN as given.
	Raw string
}

// Redacted returns the DSN with any password replaced by "xxxxx", for
// logs and error messages: the one before @, and the password and
// sentinel_password query parameters.
func (d DSN) Redacted() string {
	u, err := url.Parse(d.Raw)
	if err != nil {
		return d.Raw
	}
	q := u.Query()
	hidden := false
	for _, k := range []string{"password", "sentinel_password"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			hidden = true
		}
	}
	if hidden {
		u.RawQuery = q.Encode()
	} else if u.User == nil {
		return d.Raw
	}
	return u.Redacted()
}

// Options tune [Open].
type Options struct {
	// Migrate applies the backend's embedded migrations while opening.
	// Defaults to false.
	Migrate bool
	// MustExist refuses to create a new database (a SQLite file that is not
	// there yet), so that read-only commands do not leave empty files
	// behind. Defaults to false.
	MustExist bool
	// PGTracer, when set, traces every statement a PostgreSQL store's
	// connections send (idem bench counts them with it); other stores
	// ignore it.
	PGTracer pgx.QueryTracer
}

// Parse parses a store DSN. It never contacts the store.
func Parse(s string) (DSN, error) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return DSN{}, fmt.Errorf("storeopen: DSN %q has no scheme; want one of %s (e.g. %s)", redactRaw(s), schemeList(), Default)
	}
	d := DSN{Scheme: strings.ToLower(s[:i]), Target: s[i+3:], Raw: s}
	sc, ok := schemes[d.Scheme]
	if !ok {
		return DSN{}, fmt.Errorf("storeopen: unknown store scheme %q; want one of %s", d.Scheme, schemeList())
	}
	if strings.IndexByte(s, 0) >= 0 {
		return DSN{}, fmt.Errorf("storeopen: DSN contains a NUL byte")
	}
	if err := sc.check(d); err != nil {
		return DSN{}, fmt.Errorf("storeopen: %s DSN: %w", d.Scheme, err)
	}
	return d, nil
}

// Open parses dsn and opens the store it names. ctx bounds connecting and
// migrating only.
func Open(ctx context.Context, dsn string, opt Options) (idem.Store, error) {
	d, err := Parse(dsn)
	if err != nil {
		return nil, err
	}
	st, err := schemes[d.Scheme].open(ctx, d, opt)
	if err != nil {
		return nil, fmt.Errorf("storeopen: open %s: %w", d.Redacted(), err)
	}
	return st, nil
}

// HasSchema reports whether the store d names keeps an SQL schema, that
// is whether migrating it or printing its migrations means anything. The
// memory and Redis stores have none.
func (d DSN) HasSchema() bool { return schemes[d.Scheme].migrationsSQL != nil }

// Provision creates what the store dsn names needs besides an SQL schema
// (a NATS bucket) and describes what it made or found; ok is false for a
// store that needs nothing (see [DSN.HasSchema] for the SQL stores).
func Provision(ctx context.Context, dsn string) (desc string, ok bool, err error) {
	d, err := Parse(dsn)
	if err != nil {
		return "", false, err
	}
	p := schemes[d.Scheme].provision
	if p == nil {
		return "", false, nil
	}
	desc, err = p(ctx, d)
	if err != nil {
		return "", true, fmt.Errorf("storeopen: provision %s: %w", d.Redacted(), err)
	}
	return desc, true, nil
}

// MigrationsSQL returns the SQL that creates the schema of the store dsn
// names, bookkeeping of the applied migrations included, for teams that
// apply migrations with their own tool. For a store without a schema (see
// [DSN.HasSchema]) it returns an error wrapping [ErrNoSchema], never an
// empty script that looks like success.
func MigrationsSQL(dsn string) (string, error) {
	d, err := Parse(dsn)
	if err != nil {
		return "", err
	}
	sc := schemes[d.Scheme]
	if sc.migrationsSQL == nil {
		return "", fmt.Errorf("storeopen: %s:// store: %w", d.Scheme, ErrNoSchema)
	}
	return sc.migrationsSQL(d)
}

// Schemes returns the recognised schemes, sorted.
func Schemes() []string {
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func schemeList() string {
	names := Schemes()
	for i, n := range names {
		names[i] = n + "://"
	}
	return strings.Join(names, ", ")
}

// redactRaw hides a password in a DSN that failed to parse as ours.
func redactRaw(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.ContainsAny(s, "@") {
		return "(DSN with credentials, not shown)"
	}
	return s
}
