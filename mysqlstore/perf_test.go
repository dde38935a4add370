package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
)

// TestOpenCapsConnections: Open's pool has a cap (32 by default, or
// Config.MaxOpenConns; negative means none), and a burst of callers larger
// than the cap queues in the pool instead of opening more connections.
func TestOpenCapsConnections(t *testing.T) {
	db, dsn := rawDB(t)
	ctx := context.Background()
	for _, tc := range []struct{ cfg, want int }{{0, mysqlstore.DefaultMaxOpenConns}, {4, 4}, {-1, 0}} {
		table := testTable(t, db)
		st, err := mysqlstore.Open(ctx, dsn, mysqlstore.Config{Table: table, Migrate: true, MaxOpenConns: tc.cfg})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.PoolStats().MaxOpenConnections; got != tc.want {
			t.Errorf("MaxOpenConns %d: pool cap %d, want %d", tc.cfg, got, tc.want)
		}
		if tc.want > 0 {
			var wg sync.WaitGroup
			for i := range 4 * tc.want {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mustClaim(t, st, claimParams(fmt.Sprint("burst-", i), "a", t0))
				}()
			}
			wg.Wait()
			if s := st.PoolStats(); s.OpenConnections > tc.want {
				t.Errorf("MaxOpenConns %d: %d connections open, cap %d", tc.cfg, s.OpenConnections, tc.want)
			}
		}
		st.Close()
	}
}

// TestClaimPathsAgree runs the claim outcomes (new, own, duplicate, replay
// of a finished record, take-over of an expired one) through both claim
// paths, and checks that neither writes on a duplicate.
func TestClaimPathsAgree(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("readFirst=", readFirst), func(t *testing.T) {
			f := newFixture(t)
			st := f.st
			ctx := context.Background()
			claim := func(key, attempt string, now time.Time) idem.ClaimResult {
				st.PinClaimPath(readFirst)
				return mustClaim(t, st, claimParams(key, attempt, now))
			}
			first := claim("k", "a1", t0)
			if !first.Claimed || first.Record.Fence != 1 {
				t.Fatalf("first claim: %+v", first)
			}
			if own := claim("k", "a1", t0.Add(time.Second)); !own.Claimed || !reflect.DeepEqual(own.Record, first.Record) {
				t.Fatalf("own claim: %+v, want %+v", own, first.Record)
			}
			if dup := claim("k", "a2", t0.Add(time.Second)); dup.Claimed || !reflect.DeepEqual(dup.Record, first.Record) {
				t.Fatalf("duplicate: %+v, want unclaimed %+v", dup, first.Record)
			}
			done, err := st.Finish(ctx, succeed("k", "a1", 1, "r", t0.Add(2*time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			if rep := claim("k", "a3", t0.Add(3*time.Second)); rep.Claimed || !reflect.DeepEqual(rep.Record, *done) {
				t.Fatalf("replay: %+v, want unclaimed %+v", rep, *done)
			}
			re := claim("k", "a4", done.ExpiresAt.Add(time.Second))
			if !re.Claimed || re.Record.Fence != 2 || re.Record.Result != nil {
				t.Fatalf("take-over of the expired record: %+v", re)
			}
			if got, err := st.Get(ctx, "tenant-1", "k"); err != nil || !reflect.DeepEqual(*got, re.Record) {
				t.Fatalf("stored after take-over: %+v, %v; want %+v", got, err, re.Record)
			}
		})
	}
}

// TestKeyedUpdatesConsiderOnlyThePrimaryKey: an UPDATE that names its row
// by the whole primary key lets the optimizer consider only that key. The
// one-UPDATE Finish also checks state and created_at, and without USE
// INDEX (PRIMARY) the optimizer estimates state_created_at (index dives on
// every finish) before choosing the primary key anyway; EXPLAIN's
// possible_keys shows which indexes it analysed.
func TestKeyedUpdatesConsiderOnlyThePrimaryKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for name, q := range f.st.KeyedUpdates() {
		// The statement with its parameters spelled out, as Open's
		// interpolateParams sends it: EXPLAIN of a prepared UPDATE is
		// not allowed everywhere.
		var b strings.Builder
		for i, part := range strings.Split(q, "?") {
			if i > 0 {
				b.WriteString("'1'")
			}
			b.WriteString(part)
		}
		rows, err := f.db.QueryContext(ctx, "EXPLAIN "+b.String())
		if err != nil {
			t.Fatalf("%s: EXPLAIN: %v", name, err)
		}
		cols, _ := rows.Columns()
		n := 0
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, c := range cols {
				if c == "possible_keys" && vals[i].String != "PRIMARY" {
					t.Errorf("%s: possible_keys %q, want PRIMARY only", name, vals[i].String)
				}
			}
			n++
		}
		if err := rows.Err(); err != nil || n == 0 {
			t.Fatalf("%s: EXPLAIN gave %d rows, %v", name, n, err)
		}
		rows.Close()
	}
}
