package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// logCommitSync adds to s's records table a deferred constraint trigger
// that logs, for every row a transaction inserted or updated, the
// synchronous_commit in force when that transaction commits (deferred
// triggers run at commit, after every statement of the transaction, so
// they see what the commit uses), and returns a function reading the log
// as "op state → setting" counts.
func logCommitSync(t *testing.T, s *pgstore.Store) func() map[string]int {
	t.Helper()
	ctx := context.Background()
	pool := s.Pool()
	logT := pgx.Identifier{s.Schema(), "commit_sync"}.Sanitize()
	fn := pgx.Identifier{s.Schema(), "log_commit_sync"}.Sanitize()
	for _, q := range []string{
		`CREATE TABLE ` + logT + ` (op text NOT NULL, state "char" NOT NULL, sync text NOT NULL)`,
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ` + logT + ` VALUES (TG_OP, NEW.state, current_setting('synchronous_commit'));
	RETURN NULL;
END $$`,
		`CREATE CONSTRAINT TRIGGER log_commit_sync AFTER INSERT OR UPDATE ON ` + pgx.Identifier{s.Schema(), "idem_records"}.Sanitize() +
			` DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func() map[string]int {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT op || ' ' || state::text || ' → ' || sync, count(*) FROM `+logT+` GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv [2]any, err error) {
			var k string
			var n int
			err = r.Scan(&k, &n)
			return [2]any{k, n}, err
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, kv := range out {
			m[kv[0].(string)] = kv[1].(int)
		}
		return m
	}
}

// TestAsyncOutcomesCommitWithoutFlush checks Config.AsyncOutcomes where
// PostgreSQL decides it, at each transaction's commit: every outcome
// written on its own — the fast path with the caller's claim, the general
// terminal finish and the unknown one — commits with synchronous_commit
// off, and every claim, from 16 callers at once (group commit by default,
// on connections the outcomes used before) and in a caller's transaction,
// commits at the session's setting ("on" on the test server). Without the
// option every outcome commits at "on" too.
func TestAsyncOutcomesCommitWithoutFlush(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  pgstore.Config
		want string // synchronous_commit of the outcomes' commits
	}{
		{"async", pgstore.Config{AsyncOutcomes: true}, "off"},
		{"async-unbatched", pgstore.Config{AsyncOutcomes: true, Unbatched: true}, "off"},
		{"durable", pgstore.Config{}, "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.cfg)
			ctx := context.Background()
			var session string
			if err := s.Pool().QueryRow(ctx, "SHOW synchronous_commit").Scan(&session); err != nil {
				t.Fatal(err)
			}
			if session != "on" {
				t.Skipf("the test server's synchronous_commit is %q; the test tells outcomes from claims by on and off", session)
			}
			read := logCommitSync(t, s)

			const callers, each = 16, 12
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						key := fmt.Sprintf("k-%d-%d", c, i)
						res, err := s.Claim(ctx, claimParams(key, "a-"+key, t0))
						if err != nil {
							errs <- err
							return
						}
						p := succeed(res, `{"ok":true}`, t0.Add(time.Millisecond), time.Hour)
						switch i % 3 {
						case 0: // the fast path: the caller's claim as the hint
							p.Claim = res.Record
						case 1: // the general terminal finish
						case 2:
							p.State, p.Result, p.ExpiresAt = idem.StateUnknown, nil, time.Time{}
						}
						if _, err := s.Finish(ctx, p); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}

			// One claim and its outcome in a caller's transaction: the
			// caller's commit is never relaxed.
			tx, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			in := s.WithTx(tx)
			res := mustClaim(t, in, claimParams("in-tx", "a-in-tx", t0))
			p := succeed(res, `{"ok":true}`, t0, time.Hour)
			p.Claim = res.Record
			mustFinish(t, in, p)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}

			got := read()
			third := callers * each / 3
			want := map[string]int{
				// A deferred trigger sees the row version its event wrote.
				"INSERT p → on":         callers*each + 1,
				"UPDATE s → " + tc.want: 2 * third,
				"UPDATE u → " + tc.want: third,
			}
			want["UPDATE s → on"]++ // the caller's transaction
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("rows by the synchronous_commit of their commit:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestAsyncOutcomesRefuseBatchedFinishes: an outcome batched with claims
// would relax their commit too.
func TestAsyncOutcomesRefuseBatchedFinishes(t *testing.T) {
	pool := testPool(t)
	_, err := pgstore.New(context.Background(), pool, pgstore.Config{AsyncOutcomes: true, BatchFinishes: true,
		Batch: pgstore.Batch{Eager: true}, Schema: freshSchema(t, pool)})
	if err == nil || !strings.Contains(err.Error(), "AsyncOutcomes takes no BatchFinishes") {
		t.Fatalf("New: %v, want the refusal", err)
	}
}
