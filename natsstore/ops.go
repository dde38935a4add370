package natsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
)

// maxRounds bounds the read-decide-write rounds of one operation: each
// lost round means another writer changed the record in between, so a
// operation that loses this many is reported, not spun.
const maxRounds = 64

var errContended = errors.New("natsstore: record changed under every attempt to write it")

func utcMicro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Claim implements [idem.Store.Claim]. The claim is a write conditional on
// the key having no value (the bucket's Create: a publish that expects no
// last message on the key's subject), decided by the stream's leader and
// acknowledged once a quorum of the bucket's replicas holds it. When the
// key holds a value, the claim reads it from the leader: a live record is
// returned unchanged (a replay writes nothing), the caller's own
// in_progress record is returned as claimed (its answer was lost), and a
// tombstone or an expired terminal record is replaced by a write that
// expects exactly that revision, under fence + 1 for an expired record.
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := s.check(ctx); err != nil {
		return idem.ClaimResult{}, err
	}
	k := recordKey(p.Scope, p.Key)
	r := idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
		Fence: 1, AttemptID: p.AttemptID, Intent: bytes.Clone(p.Intent),
		CreatedAt: utcMicro(p.Now), LeaseUntil: utcMicro(p.LeaseUntil)}
	if len(r.Intent) == 0 {
		r.Intent = nil
	}
	var rev uint64 // the revision the write expects: 0, no value at all
	readFirst := s.mix.ReadFirst()
	for range maxRounds {
		if readFirst {
			// Recent claims mostly found a record: read first, so that a
			// replay is one request. The read decides nothing; the
			// conditional write below does.
			readFirst = false
			res, next, done, err := s.claimRead(ctx, k, &p, &r, s.readAny)
			if err != nil || done {
				return res, err
			}
			rev = next
		}
		newRev, err := s.write(ctx, k, encodeRecord(&r), rev)
		if err == nil {
			s.mix.Observe(false)
			s.revs.put(k, newRev, r.Fence, r.AttemptID, r.LeaseUntil)
			return idem.ClaimResult{Record: r, Claimed: true}, nil
		}
		if !conflict(err) {
			return idem.ClaimResult{}, storeErr("claim", err)
		}
		res, next, done, err := s.claimRead(ctx, k, &p, &r, s.read)
		if err != nil || done {
			return res, err
		}
		rev = next
	}
	return idem.ClaimResult{}, storeErr("claim", errContended)
}

// claimRead reads the record at k for Claim. done is true when the record
// answers the claim (a live record: the caller's own in_progress one is
// claimed, any other is returned); otherwise it returns the revision the
// claim's write must expect, with r's fence set for it: 1 over nothing or
// a tombstone, the old fence + 1 over an expired record.
//
// read is s.read (the leader) after a write lost, or s.readAny (any
// replica) for the read-first path: a replica that lags can only show an
// older revision of the record, and every answer an older revision gives
// is one the claim may return (a terminal record changes only by
// Resolve, SetMark or Sweep, none of which a replay of it must wait for;
// an in_progress one makes the caller wait or retry and read again) or
// one whose write then fails and reads the leader.
func (s *Store) claimRead(ctx context.Context, k string, p *idem.ClaimParams, r *idem.Record,
	read func(context.Context, string) (*idem.Record, uint64, error)) (res idem.ClaimResult, rev uint64, done bool, err error) {
	cur, rev, err := read(ctx, k)
	if err != nil {
		return res, 0, true, storeErr("claim", err)
	}
	switch {
	case cur == nil: // never written, a tombstone, or deleted since
		r.Fence = 1
	case cur.Expired(p.Now):
		r.Fence = cur.Fence + 1
	default:
		s.mix.Observe(true)
		own := cur.State == idem.StateInProgress && cur.AttemptID == p.AttemptID
		if own {
			s.revs.put(k, rev, cur.Fence, cur.AttemptID, cur.LeaseUntil)
		}
		return idem.ClaimResult{Record: *cur, Claimed: own}, 0, true, nil
	}
	return res, rev, false, nil
}

// write stores v at k if the key's last revision is rev (0: the key has no
// message at all).
// It returns the new revision.
func (s *Store) write(ctx context.Context, k string, v []byte, rev uint64) (uint64, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return s.kv.Update(ctx, k, v, rev)
}

// remove deletes k (a tombstone) if its last revision is rev.
func (s *Store) remove(ctx context.Context, k string, rev uint64) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return s.kv.Delete(ctx, k, jetstream.LastRevision(rev))
}

// change is one read-decide-write operation on the record at k: decide
// gets the current record (nil when absent) and returns the record to
// write, or del to delete it, or done to stop with the answer it set. A
// write that finds the revision moved on reads and decides again.
//
// after, when not nil, is called with the revision a successful write made.
func (s *Store) change(ctx context.Context, op, k string, decide func(cur *idem.Record) (next *idem.Record, del, done bool, err error), after func(rev uint64)) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	for range maxRounds {
		cur, rev, err := s.read(ctx, k)
		if err != nil {
			return storeErr(op, err)
		}
		next, del, done, err := decide(cur)
		if err != nil || done {
			return err
		}
		s.revs.drop(k)
		if s.writeGap != nil {
			s.writeGap()
		}
		var newRev uint64
		if del {
			err = s.remove(ctx, k, rev)
		} else {
			newRev, err = s.write(ctx, k, encodeRecord(next), rev)
		}
		if err == nil {
			if after != nil {
				after(newRev)
			}
			return nil
		}
		if !conflict(err) {
			return storeErr(op, err)
		}
	}
	return storeErr(op, errContended)
}

// holds reports whether r is held by (fence, attempt).
func holds(r *idem.Record, fence int64, attempt string) bool {
	return r != nil && r.Fence == fence && r.AttemptID == attempt
}

// Finish implements [idem.Store.Finish]: it reads the record from the
// leader, checks the fence and attempt in it, and writes the outcome
// conditional on the revision it read. p.Claim is not used.
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if p.State != idem.StateSucceeded && p.State != idem.StateFailed && p.State != idem.StateUnknown {
		return nil, fmt.Errorf("natsstore: finish: state %q is not succeeded, failed or unknown", p.State)
	}
	k := recordKey(p.Scope, p.Key)
	if out, ok, err := s.finishClaimed(ctx, k, &p); ok || err != nil {
		return out, err
	}
	var out *idem.Record
	err := s.change(ctx, "finish", k, func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if !holds(cur, p.Fence, p.AttemptID) {
			return nil, false, false, idem.ErrFenced
		}
		if cur.State == p.State && (p.State == idem.StateUnknown || bytes.Equal(cur.Result, p.Result)) {
			out = cur // a retried write whose answer was lost
			return nil, false, true, nil
		}
		next := *cur
		switch {
		case p.State.Terminal() && (cur.State == idem.StateInProgress || cur.State == idem.StateUnknown):
			next.State, next.Result = p.State, bytesOrNil(string(p.Result))
			next.CompletedAt, next.ExpiresAt = utcMicro(p.CompletedAt), utcMicro(p.ExpiresAt)
		case p.State == idem.StateUnknown && cur.State == idem.StateInProgress:
			next.State, next.CompletedAt = idem.StateUnknown, utcMicro(p.CompletedAt)
		default:
			return nil, false, false, idem.ErrFenced
		}
		out = &next
		return &next, false, false, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finishClaimed is Finish's one-request path: when p.Claim is the
// caller's claim and the store wrote (or found) that claim at a revision
// it still remembers, the outcome is written conditional on that
// revision, so the stored record is exactly the claim, and the answer is
// built from the claim. ok is false when the path does not apply or the
// revision moved on (a heartbeat, a mark, another writer): Finish then
// reads and decides.
func (s *Store) finishClaimed(ctx context.Context, k string, p *idem.FinishParams) (*idem.Record, bool, error) {
	c := &p.Claim
	if c.State != idem.StateInProgress || c.Scope != p.Scope || c.Key != p.Key || c.Fence != p.Fence || c.AttemptID != p.AttemptID {
		return nil, false, nil
	}
	rev, lease, ok := s.revs.take(k, p.Fence, p.AttemptID)
	if !ok {
		return nil, false, nil
	}
	if err := s.check(ctx); err != nil {
		return nil, false, err
	}
	next := *c
	next.Intent = bytesOrNil(string(c.Intent))
	next.CreatedAt, next.LeaseUntil = utcMicro(c.CreatedAt), lease // a heartbeat since the claim moved the lease
	next.State, next.CompletedAt = p.State, utcMicro(p.CompletedAt)
	if p.State.Terminal() {
		next.Result, next.ExpiresAt = bytesOrNil(string(p.Result)), utcMicro(p.ExpiresAt)
	}
	_, err := s.write(ctx, k, encodeRecord(&next), rev)
	switch {
	case err == nil:
		return &next, true, nil
	case conflict(err):
		return nil, false, nil
	}
	return nil, false, storeErr("finish", err)
}

// Release implements [idem.Store.Release]: a delete conditional on the
// revision whose record it checked.
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	return s.change(ctx, "release", recordKey(p.Scope, p.Key), func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if cur == nil {
			return nil, false, true, nil // a retry after a lost answer
		}
		if !holds(cur, p.Fence, p.AttemptID) || cur.State.Terminal() {
			return nil, false, false, idem.ErrFenced
		}
		return nil, true, false, nil
	}, nil)
}

// Heartbeat implements [idem.Store.Heartbeat].
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	k := recordKey(p.Scope, p.Key)
	return s.change(ctx, "heartbeat", k, func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if !holds(cur, p.Fence, p.AttemptID) || cur.State != idem.StateInProgress {
			return nil, false, false, idem.ErrFenced
		}
		next := *cur
		next.LeaseUntil = utcMicro(p.LeaseUntil)
		return &next, false, false, nil
	}, func(rev uint64) {
		// The outcome that follows can still be written at this revision.
		s.revs.put(k, rev, p.Fence, p.AttemptID, utcMicro(p.LeaseUntil))
	})
}

// Resolve implements [idem.Store.Resolve].
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	from := p.From
	if len(from) == 0 {
		from = []idem.State{idem.StateUnknown}
	}
	if !p.Release && p.To != idem.StateSucceeded && p.To != idem.StateFailed && p.To != idem.StateInProgress {
		return nil, fmt.Errorf("natsstore: resolve: state %q is not succeeded, failed or in_progress", p.To)
	}
	var out *idem.Record
	err := s.change(ctx, "resolve", recordKey(p.Scope, p.Key), func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if cur == nil {
			return nil, false, false, idem.ErrNotFound
		}
		if !slices.Contains(from, cur.State) || (p.Fence != 0 && cur.Fence != p.Fence) {
			return nil, false, false, idem.ErrFenced
		}
		if p.Release {
			return nil, true, false, nil
		}
		next := *cur
		next.Fence++
		next.AttemptID = p.AttemptID
		next.State = p.To
		if p.To == idem.StateInProgress {
			next.LeaseUntil, next.CompletedAt, next.ExpiresAt, next.Result = utcMicro(p.LeaseUntil), time.Time{}, time.Time{}, nil
		} else {
			next.Result, next.CompletedAt, next.ExpiresAt = bytesOrNil(string(p.Result)), utcMicro(p.Now), utcMicro(p.ExpiresAt)
		}
		out = &next
		return &next, false, false, nil
	}, nil)
	if err != nil || p.Release {
		return nil, err
	}
	return out, nil
}

// SetMark implements [idem.Store.SetMark].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	return s.change(ctx, "set mark", recordKey(scope, key), func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if cur == nil {
			return nil, false, false, idem.ErrNotFound
		}
		if cur.Fence != fence {
			return nil, false, false, idem.ErrFenced
		}
		next := *cur
		next.Mark = mark
		return &next, false, false, nil
	}, nil)
}

// Get implements [idem.Store.Get], reading from the stream's leader.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	r, _, err := s.read(ctx, recordKey(scope, key))
	if err != nil {
		return nil, storeErr("get", err)
	}
	if r == nil {
		return nil, idem.ErrNotFound
	}
	return r, nil
}
