package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

type claimFunc func(ctx context.Context, o ops, p idem.ClaimParams) (idem.ClaimResult, error)

// maxClaimRounds bounds the insert → replace → read loop. A round only
// repeats when the row vanished or expired between two statements, so more
// than a few rounds means something is badly wrong.
const maxClaimRounds = 16

func (o ops) claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := idem.ValidateKey(p.Key); err != nil {
		return idem.ClaimResult{}, err
	}
	if p.AttemptID == "" {
		return idem.ClaimResult{}, badParam("claim: empty AttemptID: a retried claim could not recognise its own row")
	}
	if o.replayCheck && o.mix.ReadFirst() {
		// Duplicates dominate: answer a duplicate from a reader, so that
		// it neither writes nor queues for the writer.
		o.probes.Add(1)
		r, err := o.get(ctx, o.read, p.Scope, p.Key)
		switch {
		case err == nil && !r.Expired(p.Now):
			o.mix.Observe(true)
			return existing(r, p), nil
		case err != nil && !errors.Is(err, idem.ErrNotFound):
			return idem.ClaimResult{}, err
		}
	}
	if o.brokenClaim != nil {
		return o.brokenClaim(ctx, o, p)
	}
	var res idem.ClaimResult
	var err error
	if o.batch != nil && o.batch.alone() {
		defer o.batch.endAlone()
		o.batch = nil
	}
	if o.batch != nil {
		res, err = o.claimBatched(ctx, p)
	} else {
		res, err = o.claimLoop(ctx, p)
	}
	if err == nil && o.replayCheck {
		o.mix.Observe(!res.Claimed)
	}
	return res, err
}

// claimBatched runs claimLoop through group commit. It is a function of
// its own because the closure's captured result escapes to the heap, which
// would otherwise cost every claim an allocation, replays included.
func (o ops) claimBatched(ctx context.Context, p idem.ClaimParams) (res idem.ClaimResult, err error) {
	err = o.batch.submit(ctx, func(ctx context.Context, bo ops) (err error) {
		res, err = bo.claimLoop(ctx, p)
		return err
	})
	return res, err
}

// claimLoop runs claim rounds on o.write until one settles.
func (o ops) claimLoop(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	for range maxClaimRounds {
		r, done, err := o.claimRound(ctx, p)
		if done || err != nil {
			return r, err
		}
	}
	return idem.ClaimResult{}, fmt.Errorf("claim %q/%q did not settle after %d rounds", p.Scope, p.Key, maxClaimRounds)
}

// claimRound tries once to claim: insert, else replace an expired terminal
// record, else return the existing record. Each statement is atomic on its
// own; done is false when the row changed between them and the round must
// be repeated.
func (o ops) claimRound(ctx context.Context, p idem.ClaimParams) (res idem.ClaimResult, done bool, err error) {
	r, err := o.insertClaim(ctx, p)
	if err == nil {
		return idem.ClaimResult{Record: *r, Claimed: true}, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return res, true, err
	}
	r, err = o.replaceExpired(ctx, p)
	if err == nil {
		return idem.ClaimResult{Record: *r, Claimed: true}, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return res, true, err
	}
	r, err = o.get(ctx, o.write, p.Scope, p.Key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return res, false, nil // released or swept a moment ago
	case err != nil:
		return res, true, err
	case r.Expired(p.Now):
		return res, false, nil // finished and already expired a moment ago
	}
	return existing(r, p), true, nil
}

// existing answers a claim that found r: Claimed only when r is the
// caller's own in-progress claim whose answer was lost.
func existing(r *idem.Record, p idem.ClaimParams) idem.ClaimResult {
	own := r.State == idem.StateInProgress && r.AttemptID == p.AttemptID
	return idem.ClaimResult{Record: *r, Claimed: own}
}

// insertClaim inserts a fresh claim; the primary key decides, and a
// conflict returns sql.ErrNoRows without writing anything. The inserted
// row is exactly what the statement wrote, so it is built here rather than
// read back with RETURNING: a plain statement is the cheapest thing to run
// on the one writer, whose time every write waits for.
func (o ops) insertClaim(ctx context.Context, p idem.ClaimParams) (*idem.Record, error) {
	created, lease := p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil)
	res, err := o.write.ExecContext(ctx, `
		INSERT INTO idem_records
			(scope, key, fingerprint, state, fence, attempt_id, intent, created_at, lease_until)
		VALUES (?, ?, ?, 'in_progress', 1, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO NOTHING`,
		p.Scope, p.Key, p.Fingerprint[:], p.AttemptID, sqlcodec.Bytes(p.Intent), created, lease)
	switch n, err := affected(res, err); {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, sql.ErrNoRows
	}
	r := &idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
		Fence: 1, AttemptID: p.AttemptID, CreatedAt: time.UnixMicro(created).UTC()}
	if len(p.Intent) > 0 {
		r.Intent = bytes.Clone(p.Intent)
	}
	if lease != nil {
		r.LeaseUntil = time.UnixMicro(lease.(int64)).UTC()
	}
	return r, nil
}

// replaceExpired re-claims a succeeded/failed record whose retention has
// passed at p.Now, bumping its fence; the expiry is checked in the same
// statement, so a record re-claimed or renewed meanwhile is left alone.
func (o ops) replaceExpired(ctx context.Context, p idem.ClaimParams) (*idem.Record, error) {
	return writeReturning(ctx, o.write, `
		UPDATE idem_records SET
			fingerprint = ?, state = 'in_progress', fence = fence + 1, attempt_id = ?,
			intent = ?, result = NULL, mark = '', created_at = ?, lease_until = ?,
			completed_at = NULL, expires_at = NULL
		WHERE scope = ? AND key = ? AND state IN ('succeeded', 'failed')
			AND expires_at IS NOT NULL AND expires_at <= ?
		RETURNING `+columns,
		p.Fingerprint[:], p.AttemptID, sqlcodec.Bytes(p.Intent), p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil),
		p.Scope, p.Key, p.Now.UnixMicro())
}
