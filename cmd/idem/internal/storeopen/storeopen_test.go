package storeopen

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

func TestParse(t *testing.T) {
	t.Parallel()
	good := map[string]DSN{
		"sqlite://idem.db":          {Scheme: "sqlite", Target: "idem.db"},
		"sqlite:///var/lib/idem.db": {Scheme: "sqlite", Target: "/var/lib/idem.db"},
		"SQLite://x.db":             {Scheme: "sqlite", Target: "x.db"},
		"memory://":                 {Scheme: "memory"},
		"postgres://u@h:5432/db":    {Scheme: "postgres", Target: "u@h:5432/db"},
		"postgresql://u:p@h/db?x=1": {Scheme: "postgresql", Target: "u:p@h/db?x=1"},
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		want.Raw = in
		if got != want {
			t.Errorf("Parse(%q) = %+v, want %+v", in, got, want)
		}
	}
	bad := []string{"", "idem.db", "://x", "sqlite://", "sqlite://:memory:", "sqlite://a.db?mode=ro",
		"sqlite://dir/", "memory://x", "postgres://", "postgres://%zz", "mongodb://h", "sqlite://a\x00b"}
	for _, in := range bad {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded, want error", in)
		}
	}
}

func TestParseUnknownSchemeNamesKnownOnes(t *testing.T) {
	t.Parallel()
	_, err := Parse("mongodb://h/db")
	if err == nil || !strings.Contains(err.Error(), "sqlite://") || !strings.Contains(err.Error(), "memory://") {
		t.Fatalf("error %v does not list the known schemes", err)
	}
}

func TestErrorsDoNotLeakPasswords(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"mongodb://user:s3cret@h/db", "user:s3cret@h/db"} {
		_, err := Parse(in)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) error %v leaks the password", in, err)
		}
	}
	d, err := Parse("postgres://user:s3cret@h/db")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Redacted(), "s3cret") {
		t.Errorf("Redacted() = %q", d.Redacted())
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, "memory://", Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Get(ctx, "", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get on a fresh memory store: %v, want ErrNotFound", err)
	}
	sql, err := MigrationsSQL("memory://")
	if !errors.Is(err, ErrNoSchema) || sql != "" {
		t.Fatalf("MigrationsSQL(memory://) = %q, %v; want ErrNoSchema", sql, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"sqlite://idem.db", "memory://", "postgres://u:p@h/db?sslmode=disable",
		"sqlite://", "://", "x", "SQLITE:///a/b", "redis://h",
		"postgres://h/db?schema=bad;name", "mysql://root@h/test?table=a;b", "postgres://h/db?notify=false",
		"redis+cluster://u:p@a:1,b:2/0?prefix=p&wait_replicas=1&wait_timeout=1s", "redis://h/0?wait_aof_local=1",
		"redis+sentinel://u:p@a:26379,b/0?master=m&wait_replicas=all&min_replicas=1&sentinel_password=x",
		"redis+cluster://a:1,b:2?cluster_refresh=500ms&wait_replicas=all", "redis+sentinel://h?master=",
		"postgres://u@a:1,b:2/db?target_session_attrs=read-write&replicated_claims=on&replicated_claims_timeout=1s",
		"dynamodb://idem-records?region=eu-west-1&endpoint=http://127.0.0.1:8000&ttl_grace=1h&index_shards=8", "dynamodb://a?b=%zz",
		"nats://a:4222,b/idem?replicas=3&storage=file&call_timeout=5s", "nats://u:p@h/b", "nats://h", "nats://h/a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			if d != (DSN{}) {
				t.Fatalf("Parse(%q) returned %+v with error %v", s, d, err)
			}
			return
		}
		if _, ok := schemes[d.Scheme]; !ok {
			t.Fatalf("Parse(%q) accepted unknown scheme %q", s, d.Scheme)
		}
		if d.Raw != s || !strings.HasSuffix(s, d.Target) {
			t.Fatalf("Parse(%q) = %+v does not round-trip", s, d)
		}
		// A parsed DSN parses again to the same value.
		d2, err := Parse(d.Raw)
		if err != nil || d2 != d {
			t.Fatalf("reparse of %q: %+v, %v", s, d2, err)
		}
		// Whatever Parse accepts, --print can print: a bad parameter is a
		// Parse error, never a script that is a comment or empty.
		script, err := MigrationsSQL(s)
		want := "CREATE TABLE"
		if d.Scheme == "dynamodb" {
			want = `"TableName"` // the CreateTable request, as JSON
		}
		switch {
		case d.HasSchema() && (err != nil || !strings.Contains(script, want)):
			t.Fatalf("Parse accepted %q but MigrationsSQL = %q, %v", s, script, err)
		case !d.HasSchema() && !errors.Is(err, ErrNoSchema):
			t.Fatalf("MigrationsSQL(%q) = %v, want ErrNoSchema", s, err)
		}
	})
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/idem.db"
	if _, err := Open(ctx, dsn, Options{MustExist: true}); err == nil || !strings.Contains(err.Error(), "idem migrate") {
		t.Fatalf("MustExist on a missing file: %v", err)
	}
	st, err := Open(ctx, dsn, Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "", "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get on a fresh sqlite store: %v", err)
	}
	st.Close()
	st, err = Open(ctx, dsn, Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	sql, err := MigrationsSQL(dsn)
	if err != nil || !strings.Contains(strings.ToUpper(sql), "CREATE TABLE") {
		t.Fatalf("MigrationsSQL: %v\n%s", err, sql)
	}
}
