package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/pgstore"
)

// stmtCounter is a pgx.QueryTracer counting the statements sent.
type stmtCounter struct{ n atomic.Int64 }

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// OpenConfig keeps what the caller set on the configuration (here a
// tracer, which a DSN cannot carry), owns the pool it opens, and refuses a
// nil configuration with an error.
func TestOpenConfig(t *testing.T) {
	dsn := testenv.Postgres.Need(t)
	ctx := context.Background()
	if _, err := pgstore.OpenConfig(ctx, nil, pgstore.Config{}); err == nil {
		t.Fatal("OpenConfig(nil) returned no error")
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tr := &stmtCounter{}
	pcfg.ConnConfig.Tracer = tr
	schema := freshSchema(t, testPool(t))
	st, err := pgstore.OpenConfig(ctx, pcfg, pgstore.Config{Schema: schema, Migrate: true})
	if err != nil {
		t.Fatalf("OpenConfig: %v", err)
	}
	before := tr.n.Load()
	c := mustClaim(t, st, claimParams("traced", "a1", t0))
	mustFinish(t, st, succeed(c, "ok", t0, 3600e9))
	if got := tr.n.Load() - before; got < 2 {
		t.Errorf("the tracer saw %d statements for a claim and a finish, want at least 2", got)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Pool().Ping(ctx); err == nil {
		t.Error("the pool still answers after Close: OpenConfig's store does not own it")
	}
}
