package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// CreateTableWithoutPrimaryKey creates the records table as migration 1
// does but without its primary key: the schema a careless migration would
// leave. It fails if the migration no longer has the line it removes, so
// the evidence test cannot silently test the real schema.
func (s *Store) CreateTableWithoutPrimaryKey(ctx context.Context) error {
	stmts := migrationStatements(migrations[0], s.table)
	const pk = "PRIMARY KEY (scope, `key`),"
	if len(stmts) != 1 || !strings.Contains(stmts[0], pk) {
		return fmt.Errorf("migration 1 has no %q line to remove", pk)
	}
	_, err := s.db.ExecContext(ctx, strings.Replace(stmts[0], pk, "KEY scope_key (scope, `key`),", 1))
	return err
}

// CheckThenInsert wraps s with the claim the contract forbids: read, and
// insert if nothing was there, as two steps. On a table with the primary
// key the INSERT still fails for the loser; without it, two callers both
// "claim" the key.
func CheckThenInsert(s *Store) idem.Store { return checkThenInsert{s} }

type checkThenInsert struct{ *Store }

func (c checkThenInsert) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	rec, err := c.readRecord(ctx, p.Scope, p.Key, c.sql.get)
	switch {
	case err == nil && !rec.Expired(p.Now):
		return idem.ClaimResult{Record: *rec, Claimed: rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID}, nil
	case err != nil && !errors.Is(err, errMissing):
		return idem.ClaimResult{}, c.wrap("claim", err)
	}
	if _, err := c.q.ExecContext(ctx, c.sql.insert, p.Scope, p.Key, p.Fingerprint[:], p.AttemptID,
		sqlcodec.Bytes(p.Intent), p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil)); err != nil {
		return idem.ClaimResult{}, c.wrap("claim", err)
	}
	return idem.ClaimResult{Record: newClaim(p, 1), Claimed: true}, nil
}

// PoolStats reports the store's connection pool.
func (s *Store) PoolStats() sql.DBStats { return s.db.Stats() }

// PinClaimPath makes the next claims take the read-first path (true) or
// the INSERT-first path (false), until the mix moves again.
func (s *Store) PinClaimPath(readFirst bool) {
	if readFirst {
		s.mix.Pin(true)
	} else {
		s.mix.Pin(false)
	}
}

// KeyedUpdates returns the UPDATE statements that name their row by the
// whole primary key, by name.
func (s *Store) KeyedUpdates() map[string]string {
	q := s.sql
	return map[string]string{"reclaim": q.reclaim, "finish": q.finish, "finishKnown": q.finishKnown,
		"heartbeat": q.heartbeat, "resolveTo": q.resolveTo, "setMark": q.setMark}
}
