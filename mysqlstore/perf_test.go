package mysqlstore_test

import (
	"context"
	"fmt"
	"reflect"
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
