package crashtest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/sim"
	"github.com/idemkit/idem/sqlitestore"
)

// TestSimSQLite (here, in a test module, because the simulation is
// internal to the root module, which a store module's tests must not
// import) runs worlds of the engine's seeded simulation (see
// internal/sim and docs/testing.md) on SQLite database files, checks their
// histories, and compares each with the same world on memstore: the store
// contract decides everything the engine sees, so both stores must give
// the same history, entry for entry.
func TestSimSQLite(t *testing.T) {
	worlds := 3
	if testing.Short() {
		worlds = 1
	}
	for seed := uint64(1); seed <= uint64(worlds); seed++ {
		cfg := sim.Default(seed)
		cfg.Intents = 300
		mem := sim.Run(cfg)
		dir := t.TempDir()
		n := 0
		cfg.NewStore = func() (idem.Store, func(), error) {
			n++
			// NORMAL: the simulation kills processes, not the machine.
			st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "sim.db"), sqlitestore.Config{Synchronous: "NORMAL", Migrate: true})
			if err != nil {
				return nil, nil, err
			}
			return st, func() { _ = st.Close() }, nil
		}
		r := sim.Run(cfg)
		t.Log(r.Summary())
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		if r.Failed() {
			t.Errorf("seed %d on SQLite:\n%s", seed, sim.Report(r))
		}
		if len(mem.History) != len(r.History) {
			t.Errorf("seed %d: %d history entries on memstore, %d on SQLite", seed, len(mem.History), len(r.History))
			continue
		}
		for i := range r.History {
			if mem.History[i] != r.History[i] {
				t.Errorf("seed %d: the histories part at entry %d:\n  memstore: %s\n  SQLite:   %s", seed, i, mem.History[i], r.History[i])
				break
			}
		}
	}
}
