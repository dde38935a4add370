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
	for range maxRounds {
		err := s.write(ctx, k, encodeRecord(&r), rev)
		if err == nil {
			return idem.ClaimResult{Record: r, Claimed: true}, nil
		}
		if !conflict(err) {
			return idem.ClaimResult{}, storeErr("claim", err)
		}
		cur, curRev, err := s.read(ctx, k)
		if err != nil {
			return idem.ClaimResult{}, storeErr("claim", err)
		}
		switch {
		case cur == nil: // a tombstone, or deleted since
			r.Fence, rev = 1, curRev
		case cur.Expired(p.Now):
			r.Fence, rev = cur.Fence+1, curRev
		default:
			own := cur.State == idem.StateInProgress && cur.AttemptID == p.AttemptID
			return idem.ClaimResult{Record: *cur, Claimed: own}, nil
		}
	}
	return idem.ClaimResult{}, storeErr("claim", errContended)
}

// write stores v at k if the key's last revision is rev (0: the key has no
// message at all).
func (s *Store) write(ctx context.Context, k string, v []byte, rev uint64) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	_, err := s.kv.Update(ctx, k, v, rev)
	return err
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
func (s *Store) change(ctx context.Context, op, k string, decide func(cur *idem.Record) (next *idem.Record, del, done bool, err error)) error {
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
		if del {
			err = s.remove(ctx, k, rev)
		} else {
			err = s.write(ctx, k, encodeRecord(next), rev)
		}
		if err == nil {
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
	var out *idem.Record
	err := s.change(ctx, "finish", recordKey(p.Scope, p.Key), func(cur *idem.Record) (*idem.Record, bool, bool, error) {
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
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	})
}

// Heartbeat implements [idem.Store.Heartbeat].
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	return s.change(ctx, "heartbeat", recordKey(p.Scope, p.Key), func(cur *idem.Record) (*idem.Record, bool, bool, error) {
		if !holds(cur, p.Fence, p.AttemptID) || cur.State != idem.StateInProgress {
			return nil, false, false, idem.ErrFenced
		}
		next := *cur
		next.LeaseUntil = utcMicro(p.LeaseUntil)
		return &next, false, false, nil
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
	})
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
	})
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
