package storeopen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostore"
	"github.com/idemkit/idem/internal/testenv"
)

func TestDynamoDSN(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"dynamodb://idem-records", "dynamodb://idem.records?region=eu-west-1",
		"dynamodb://idem?endpoint=http://127.0.0.1:8000&ttl_grace=2h&index_shards=16"} {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
		}
	}
	for _, in := range []string{"dynamodb://", "dynamodb://ab", "dynamodb://idem records", "dynamodb://idem?ttl_grace=-1h",
		"dynamodb://idem?index_shards=0", "dynamodb://idem?endpoint=127.0.0.1:8000", "dynamodb://idem?consistent=false"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", in)
		}
	}
	dd, err := parseDynamo(DSN{Scheme: "dynamodb", Target: "idem?ttl_grace=2h&index_shards=16"})
	if err != nil || dd.cfg.TTLGrace != 2*time.Hour || dd.cfg.IndexShards != 16 {
		t.Fatalf("parseDynamo = %+v, %v", dd, err)
	}
	sql, err := MigrationsSQL("dynamodb://idem-records")
	if err != nil || !strings.Contains(sql, `"IndexName": "idem-state-age"`) || !strings.Contains(sql, `"IndexName": "idem-expiry"`) {
		t.Fatalf("--print = %s, %v; want the CreateTable request with both indexes", sql, err)
	}
}

// TestOpenDynamo migrates a table on dynalite through a DSN, opens it,
// and runs one intent through it.
func TestOpenDynamo(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	ep := testenv.StartDynalite(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "dynamodb://idem-open?endpoint=" + ep
	if _, err := Open(ctx, dsn, Options{MustExist: true}); err == nil {
		t.Fatal("MustExist opened a table that does not exist")
	}
	st, err := Open(ctx, dsn, Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds, ok := st.(*dynamostore.Store)
	if !ok {
		t.Fatalf("store is %T", st)
	}
	if v, _, err := ds.CheckSchema(ctx); err != nil || v != dynamostore.SchemaVersion {
		t.Fatalf("CheckSchema = %d, %v", v, err)
	}
	eng, err := idem.New(st, idem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	runs := 0
	for range 2 {
		_, err := eng.DoBytes(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: idem.NewFingerprint([]byte("r"))},
			func(context.Context, *idem.Attempt) ([]byte, error) { runs++; return []byte("ok"), nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs != 1 {
		t.Fatalf("runs = %d", runs)
	}
}
