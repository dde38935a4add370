package pgstore

import (
	"context"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/migration"
)

// NoRowRounds reports how many claim statements returned no row so far.
func NoRowRounds() int64 { return noRowRounds.Load() }

// ListenerPID is the backend PID of the store's listening connection, or 0.
func (s *Store) ListenerPID() uint32 {
	if s.lis == nil {
		return 0
	}
	s.lis.mu.Lock()
	defer s.lis.mu.Unlock()
	return s.lis.pid
}

// QuotedTable is the schema-qualified, quoted records table.
func (s *Store) QuotedTable() string { return s.names.table }

// EncodeAttempt is an attempt id as the table stores it (migration 0003).
var EncodeAttempt = encodeAttempt

// CheckThenInsert breaks s on purpose, for the constraint-evidence test: it
// drops the primary key and returns a store whose Claim reads first and
// inserts after, the design the contract forbids.
func CheckThenInsert(ctx context.Context, s *Store) (idem.Store, error) {
	pk := s.names.replacer.Replace("{{pkey}}")
	if _, err := s.pool.Exec(ctx, "ALTER TABLE "+s.names.table+" DROP CONSTRAINT "+pk); err != nil {
		return nil, err
	}
	return checkThenInsert{s}, nil
}

type checkThenInsert struct{ *Store }

func (b checkThenInsert) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	rec, err := b.get(ctx, p.Scope, p.Key)
	if err == nil {
		mine := rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID
		return idem.ClaimResult{Record: rec, Claimed: mine}, nil
	}
	if !isNoRows(err) {
		return idem.ClaimResult{}, wrap("claim", err)
	}
	time.Sleep(time.Millisecond) // widen the window a real network gives for free
	_, err = b.pool.Exec(ctx, "INSERT INTO "+b.names.table+
		" (scope, key, fingerprint, state, fence, attempt_id, intent, created_at, lease_until) VALUES ($1, $2, $3, 'p', 1, $4, $5, $6, $7)",
		p.Scope, p.Key, p.Fingerprint[:], encodeAttempt(p.AttemptID), p.Intent, p.Now.UTC(), nullTime(p.LeaseUntil))
	if err != nil {
		return idem.ClaimResult{}, wrap("claim", err)
	}
	rec = idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress, Fence: 1,
		AttemptID: p.AttemptID, Intent: p.Intent, CreatedAt: p.Now, LeaseUntil: p.LeaseUntil}
	return idem.ClaimResult{Record: rec, Claimed: true}, nil
}

// BatchFallbacks reports how many batches were rolled back because one of
// their statements failed, and replayed request by request.
func (s *Store) BatchFallbacks() int64 {
	if s.batch == nil {
		return 0
	}
	return s.batch.fallbacks.Load()
}

// BatchStats reports how many writes were queued for group commit and the
// most one batch transaction held.
func (s *Store) BatchStats() (submitted, largestTx int64) {
	if s.batch == nil {
		return 0, 0
	}
	return s.batch.submitted.Load(), s.batch.largestTx.Load()
}

// MaxTxWrites is the most writes one batch transaction holds.
const MaxTxWrites = maxTxWrites

// ForceInsertFirst puts the claim-path chooser into its first-time mode
// (plain insert first), as after a run of new keys.
func ForceInsertFirst(s *Store) { s.mix.Pin(false) }

// FinishKnown runs only Finish's one-UPDATE path for p on st (a Store or a
// transaction view): the record, or nil, nil when that path does not apply
// or changed nothing.
func FinishKnown(ctx context.Context, st idem.Store, p idem.FinishParams) (*idem.Record, error) {
	switch v := st.(type) {
	case *Store:
		return v.finishKnown(ctx, p, v.finishBatcher())
	case txStore:
		return v.finishKnown(ctx, p, v.finishBatcher())
	}
	panic("FinishKnown: not a pgstore store")
}

// ListSQL is the statement and arguments List runs for f.
func (s *Store) ListSQL(f idem.ListFilter) (string, []any) { return listQuery(s.sql.list, f) }

// SweepSQL is the bounded sweep statement; its parameters are the time
// expiry is judged at and the batch size.
func (s *Store) SweepSQL() string { return s.sql.sweep }

// SweepSinceSQL is the sweep with its walk bounded; its third parameter
// is the latest creation time it reads.
func (s *Store) SweepSinceSQL() string { return s.sql.sweepSince }

// MigrateFirst applies only the first n embedded migrations, as a store of
// an earlier release did.
func (s *Store) MigrateFirst(ctx context.Context, n int) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := ensureSchema(ctx, tx, s.cfg.Schema, s.names.schema); err != nil {
		return err
	}
	if err := migration.Run(ctx, migrationTx{tx: tx, names: s.names}, migrations()[:n]); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// OrphanBatches is how many eager batches were written for a leader whose
// caller had left.
func (s *Store) OrphanBatches() int64 {
	if s.batch == nil || s.batch.led == nil {
		return 0
	}
	return s.batch.led.orphans.Load()
}

// GroupCommit reports s's group commit as configured: the batch settings,
// whether outcomes are batched, and whether it is on at all.
func (s *Store) GroupCommit() (b Batch, finishes, on bool) {
	return s.cfg.Batch, s.cfg.BatchFinishes, s.batch != nil
}
