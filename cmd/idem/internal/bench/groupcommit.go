package bench

import (
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/groupcommit"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// groupCommitOf describes the group commit st runs, the CLI's defaults
// included (the DSN's query shows only what was written there); empty for
// a store without group commit.
func groupCommitOf(st idem.Store) string {
	switch s := st.(type) {
	case *pgstore.Store:
		c := s.Config()
		d := describeBatch(c.Batch)
		if c.Batch.On() {
			if c.BatchFinishes {
				d += ", outcomes batched"
			} else {
				d += ", outcomes in commits of their own"
			}
		}
		return d
	case *sqlitestore.Store:
		return describeBatch(s.Config().Batch)
	}
	return ""
}

// connectionsOf is the most connections st's pool opens, which the raw
// side's pool (built from the same DSN) shares; 0 for a store without a
// connection pool of its own. A group commit writes several callers'
// statements on one connection, so how far it gets ahead of the raw
// driver depends on it: with fewer connections than callers, the raw
// side's callers queue for a connection.
func connectionsOf(st idem.Store) int {
	if s, ok := st.(*pgstore.Store); ok && s.Pool() != nil {
		return int(s.Pool().Config().MaxConns)
	}
	return 0
}

func describeBatch(b groupcommit.Config) string {
	switch {
	case b.Eager:
		return "eager (no window)"
	case b.Window > 0:
		return "window " + b.Window.String()
	}
	return "off"
}
