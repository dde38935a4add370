package mysqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

// maxRounds bounds the read-decide-write loops. A round repeats only when
// another writer changed the record between our statements (a release, a
// sweep, a competing re-claim), so a handful is plenty; the bound keeps a
// pathological workload from spinning forever.
const maxRounds = 64

// Claim implements [idem.Store.Claim].
//
// It runs a plain INSERT and lets the primary key decide. If the key
// exists, the INSERT fails with error 1062 having written nothing, and the
// claim reads the existing record; a duplicate therefore costs two round
// trips and no write, while a first claim costs one. When recent claims
// were mostly duplicates (outside a transaction), Claim reads the record
// first with a plain SELECT by primary key, which decides nothing: a live
// record answers the claim in one round trip, and an absent or expired one
// goes on to the INSERT as above. (INSERT IGNORE would
// hide other errors, and ON DUPLICATE KEY UPDATE writes a row version on
// every replay.) An expired succeeded/failed record is re-claimed by an
// UPDATE that re-checks the expiry and the fence it read. When the record
// vanishes between the INSERT and the read (released or swept), the claim
// starts over.
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.usable(); err != nil {
		return idem.ClaimResult{}, err
	}
	if err := checkIdentity(p.Scope, p.Key); err != nil {
		return idem.ClaimResult{}, err
	}
	if err := checkAttempt(p.AttemptID); err != nil {
		return idem.ClaimResult{}, err
	}
	for range maxRounds {
		res, done, err := s.claimRound(ctx, p)
		if err != nil || done {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return idem.ClaimResult{}, s.wrap("claim", err)
		}
	}
	return idem.ClaimResult{}, s.wrap("claim", fmt.Errorf("key %q changed hands %d times during one claim", p.Key, maxRounds))
}

// claimRound makes one attempt; done is false when the record moved under
// it and the caller should try again.
func (s *Store) claimRound(ctx context.Context, p idem.ClaimParams) (res idem.ClaimResult, done bool, err error) {
	if s.tx == nil && s.mix.ReadFirst() {
		rec, err := s.readRecord(ctx, p.Scope, p.Key, s.sql.get)
		switch {
		case err == nil && !rec.Expired(p.Now):
			s.mix.Observe(true)
			return s.existing(p, rec), true, nil
		case err != nil && !errors.Is(err, errMissing):
			return res, true, s.wrap("claim", err)
		}
	}
	fpr := p.Fingerprint // a copy, so that only these 32 bytes go to the heap, not p
	_, err = s.q.ExecContext(ctx, s.sql.insert, p.Scope, p.Key, fpr[:], p.AttemptID,
		sqlcodec.Bytes(p.Intent), p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil))
	s.mix.Observe(err != nil && isDuplicate(err))
	switch {
	case err == nil:
		return idem.ClaimResult{Record: newClaim(p, 1), Claimed: true}, true, nil
	case s.retryable(err):
		return res, false, nil
	case !isDuplicate(err):
		return res, true, s.wrap("claim", err)
	}
	rec, err := s.readRecord(ctx, p.Scope, p.Key, s.duplicateRead())
	if errors.Is(err, errMissing) {
		return res, false, nil
	}
	if err != nil {
		return res, true, s.wrap("claim", err)
	}
	if !rec.Expired(p.Now) {
		return s.existing(p, rec), true, nil
	}
	return s.reclaim(ctx, p, rec)
}

// existing answers a claim that found a live record: someone else's, or
// our own earlier claim that committed while its answer was lost.
func (s *Store) existing(p idem.ClaimParams, rec *idem.Record) idem.ClaimResult {
	own := rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID
	return idem.ClaimResult{Record: *rec, Claimed: own}
}

// reclaim replaces an expired terminal record with a new claim under the
// next fence, if it is still the record that was read and still expired.
func (s *Store) reclaim(ctx context.Context, p idem.ClaimParams, old *idem.Record) (idem.ClaimResult, bool, error) {
	done, err := s.write(ctx, "claim", s.sql.reclaim, p.Fingerprint[:], p.AttemptID, sqlcodec.Bytes(p.Intent),
		p.Now.UnixMicro(), sqlcodec.Micros(p.LeaseUntil), p.Scope, p.Key, old.Fence, p.Now.UnixMicro())
	if !done || err != nil {
		return idem.ClaimResult{}, done, err
	}
	return idem.ClaimResult{Record: newClaim(p, old.Fence+1), Claimed: true}, true, nil
}

// newClaim is the record a successful claim wrote.
func newClaim(p idem.ClaimParams, fence int64) idem.Record {
	return idem.Record{
		Scope:       p.Scope,
		Key:         p.Key,
		Fingerprint: p.Fingerprint,
		State:       idem.StateInProgress,
		Fence:       fence,
		AttemptID:   p.AttemptID,
		Intent:      p.Intent,
		CreatedAt:   sqlcodec.Stored(p.Now),
		LeaseUntil:  sqlcodec.Stored(p.LeaseUntil),
	}
}
