package mysqlstore_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp/middlewaretest"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/storetest"
)

// sharedPool opens one pool for a test and its subtests, configured as
// Open configures its own.
func sharedPool(t testing.TB) *sql.DB {
	t.Helper()
	dsn := testenv.MySQL.Need(t)
	db, err := sql.Open("mysql", withParam(dsn, "interpolateParams=true"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// migrated returns a store on a fresh, migrated table of db.
func migrated(t *testing.T, db *sql.DB) *mysqlstore.Store {
	t.Helper()
	st, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: testTable(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	db := sharedPool(t)
	var tables sync.Map // *mysqlstore.Store → table name
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store {
			st := migrated(t, db)
			tables.Store(st, st.Table())
			return st
		},
		// A second store with its own connection pool on the same table, as
		// another process opens it.
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			table, _ := tables.Load(st)
			peer, err := mysqlstore.New(context.Background(), sharedPool(t), mysqlstore.Config{Table: table.(string)})
			if err != nil {
				t.Fatal(err)
			}
			return peer
		},
	})
}

// TestConstraintEvidence shows that the primary key is what keeps effects
// single: a check-then-insert claim on a table without it runs duplicate
// effects under the suite's race, and the real store runs none.
func TestConstraintEvidence(t *testing.T) {
	db := sharedPool(t)
	ctx := context.Background()

	broken, err := mysqlstore.New(context.Background(), db, mysqlstore.Config{Table: testTable(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	if err := broken.CreateTableWithoutPrimaryKey(ctx); err != nil {
		t.Fatal(err)
	}
	extra := storetest.RaceEffects(t, mysqlstore.CheckThenInsert(broken), 64, 30)
	if extra == 0 {
		t.Fatal("check-then-insert without a primary key ran no duplicate effect: the evidence has no teeth")
	}
	t.Logf("without the primary key: %d duplicate effects", extra)

	if extra := storetest.RaceEffects(t, migrated(t, db), 64, 30); extra != 0 {
		t.Errorf("the real store ran %d duplicate effects", extra)
	}
}

// TestConformanceOpen runs the suite on stores made by Open, whose pool
// allows multi-statement batches: Finish takes its one-round-trip path.
func TestConformanceOpen(t *testing.T) {
	db, dsn := rawDB(t)
	open := func(t *testing.T, table string) *mysqlstore.Store {
		st, err := mysqlstore.Open(context.Background(), dsn, mysqlstore.Config{Table: table, Migrate: true, MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	var tables sync.Map // *mysqlstore.Store → table name
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idem.Store {
			st := open(t, testTable(t, db))
			tables.Store(st, st.Table())
			return st
		},
		NewPeer: func(t *testing.T, st idem.Store) idem.Store {
			table, _ := tables.Load(st)
			peer := open(t, table.(string))
			t.Cleanup(func() { peer.Close() })
			return peer
		},
	})
}

// TestMiddleware runs idemhttp's guarantees on this store, each case in a
// table of its own.
func TestMiddleware(t *testing.T) {
	db := sharedPool(t)
	middlewaretest.Run(t, func(t *testing.T) idem.Store { return migrated(t, db) })
}
