package idem

import (
	"context"
	"time"
)

// Store keeps records and decides, atomically, who owns a key. Every backend
// implements it and runs the conformance suite in package storetest.
//
// All times are supplied by the caller (the engine's clock), so a store never
// consults its own clock; this keeps behaviour testable and identical across
// backends. Callers pass times truncated to the microsecond (the engine does);
// a store must return them equal at that precision, in UTC.
//
// Errors: a write whose fence (or attempt id) no longer matches returns an
// error that satisfies errors.Is(err, [ErrFenced]) and writes nothing. A
// missing record returns [ErrNotFound]. Operations on a closed store return
// [ErrClosed]. Other backend errors are returned wrapped; the engine treats
// them as "store unavailable".
type Store interface {
	// Claim inserts an in_progress record for (p.Scope, p.Key) with fence 1
	// if none exists, or replaces an expired succeeded/failed record (see
	// [Record.Expired] at p.Now) with fence = old fence + 1, in one atomic
	// step decided by a unique constraint or an equivalent primitive — never
	// check-then-insert. The new record carries p.AttemptID, p.Fingerprint,
	// p.Intent, CreatedAt = p.Now and LeaseUntil = p.LeaseUntil.
	//
	// Otherwise it returns the existing record unchanged with Claimed false,
	// and must not write (a replay costs no write). One exception: when the
	// existing record is in_progress with AttemptID == p.AttemptID, the
	// caller's earlier claim committed but its answer was lost, so Claim
	// returns that record with Claimed true.
	Claim(ctx context.Context, p ClaimParams) (ClaimResult, error)

	// Finish records an outcome for the attempt (p.Fence, p.AttemptID).
	//
	// p.State is StateSucceeded or StateFailed: accepted while the record is
	// in_progress or unknown with that fence and attempt (unknown → terminal
	// is the truth arriving late). Sets Result, CompletedAt, ExpiresAt.
	//
	// p.State is StateUnknown: accepted only while the record is in_progress
	// with that fence and attempt; the fence does not change. Sets
	// CompletedAt; ExpiresAt stays zero.
	//
	// If the record already holds exactly this outcome for this fence and
	// attempt (a retried write whose answer was lost), Finish succeeds
	// without writing. Anything else returns ErrFenced.
	//
	// The returned record is the caller's: the store keeps no reference to
	// it and never modifies it (its byte slices may be shared, read-only).
	Finish(ctx context.Context, p FinishParams) (*Record, error)

	// Release deletes the record held by (p.Fence, p.AttemptID) while it is
	// in_progress or unknown: the handler asserts no effect happened and the
	// key may be claimed again. Releasing an absent record succeeds (a retry
	// after a lost answer); a record held by another fence or attempt, or
	// already terminal, returns ErrFenced.
	Release(ctx context.Context, p ReleaseParams) error

	// Heartbeat extends LeaseUntil to p.LeaseUntil while the record is
	// in_progress with that fence and attempt; otherwise ErrFenced.
	Heartbeat(ctx context.Context, p HeartbeatParams) error

	// Resolve moves a record whose current state is one of p.From (and whose
	// fence equals p.Fence, unless p.Fence is 0) to p.To, bumping the fence
	// by one and setting AttemptID to p.AttemptID. It is the operator,
	// recovery and reconciliation path, and the re-drive path:
	//   - To succeeded/failed: sets Result, CompletedAt, ExpiresAt.
	//   - To in_progress: a re-drive under a new fence; sets LeaseUntil,
	//     clears CompletedAt and Result.
	//   - p.Release true: deletes the record instead (To is ignored).
	// A record that is absent returns ErrNotFound; one in another state or
	// with another fence returns ErrFenced.
	Resolve(ctx context.Context, p ResolveParams) (*Record, error)

	// SetMark stores a reconciliation mark on the record with the given fence
	// without changing anything else; ErrFenced if the fence moved on,
	// ErrNotFound if absent.
	SetMark(ctx context.Context, scope, key string, fence int64, mark Mark) error

	// Get returns the record for (scope, key), or ErrNotFound. An expired
	// terminal record may still be returned; callers check Expired.
	Get(ctx context.Context, scope, key string) (*Record, error)

	// List returns records matching f, oldest CreatedAt first, at most
	// f.Limit (0 means no limit).
	List(ctx context.Context, f ListFilter) ([]Record, error)

	// Sweep deletes at most p.Limit records that are succeeded or failed and
	// expired at p.Now, deciding both conditions in the same statement as the
	// delete so a record re-claimed a moment earlier is never removed. It
	// never deletes in_progress or unknown records. It returns how many it
	// deleted.
	Sweep(ctx context.Context, p SweepParams) (int, error)

	// Close releases the store's resources. Later calls return ErrClosed.
	Close() error
}

// Notifier is implemented by stores that can tell waiters a record changed
// without polling (Postgres LISTEN/NOTIFY, Redis pub/sub, the memory store).
// The engine falls back to polling with capped backoff without it.
type Notifier interface {
	// Subscribe returns a channel that receives a value (it may coalesce)
	// whenever the record for (scope, key) may have changed, until cancel is
	// called. A store may also signal spuriously.
	Subscribe(ctx context.Context, scope, key string) (ch <-chan struct{}, cancel func(), err error)
}

// ClaimParams are the inputs of [Store.Claim].
type ClaimParams struct {
	Scope       string
	Key         string
	Fingerprint Fingerprint
	AttemptID   string
	Intent      []byte
	Now         time.Time
	LeaseUntil  time.Time
}

// ClaimResult is the outcome of [Store.Claim]. A duplicate is a flag on the
// result, not an error.
type ClaimResult struct {
	// Record is the record after the call: the new claim, or the existing one.
	Record Record
	// Claimed is true when the caller now owns the key and must run the
	// effect; false when Record belongs to someone else.
	Claimed bool
}

// FinishParams are the inputs of [Store.Finish].
type FinishParams struct {
	Scope       string
	Key         string
	Fence       int64
	AttemptID   string
	State       State // StateSucceeded, StateFailed or StateUnknown
	Result      []byte
	CompletedAt time.Time
	ExpiresAt   time.Time // zero for StateUnknown
	// Claim is optional: the record as the caller holds it for this fence
	// and attempt (the answer of its claim), or the zero Record. It is only
	// a hint: a store may return the finished record built from Claim and
	// these params instead of reading the record back, but only after
	// checking, in the same atomic write, that the stored record still
	// holds Claim's values; a store may ignore it. It never changes what
	// Finish decides. A Claim whose Scope, Key, Fence or AttemptID differ
	// from these params is no hint.
	Claim Record
}

// ReleaseParams are the inputs of [Store.Release].
type ReleaseParams struct {
	Scope     string
	Key       string
	Fence     int64
	AttemptID string
}

// HeartbeatParams are the inputs of [Store.Heartbeat].
type HeartbeatParams struct {
	Scope      string
	Key        string
	Fence      int64
	AttemptID  string
	LeaseUntil time.Time
}

// ResolveParams are the inputs of [Store.Resolve].
type ResolveParams struct {
	Scope string
	Key   string
	// Fence, when not zero, must equal the record's current fence.
	Fence int64
	// From lists the states the record may be in; empty means unknown only.
	From []State
	// To is StateSucceeded, StateFailed or StateInProgress.
	To State
	// Release deletes the record instead of moving it to To.
	Release    bool
	AttemptID  string
	Result     []byte
	Now        time.Time
	LeaseUntil time.Time // for To == StateInProgress
	ExpiresAt  time.Time // for terminal To
}

// ListFilter selects records for [Store.List]. Zero fields match everything.
type ListFilter struct {
	// Scope, when not empty, restricts to one scope.
	Scope string
	// States, when not empty, restricts to these states.
	States []State
	// CreatedBefore, when not zero, keeps records created before it.
	CreatedBefore time.Time
	// Limit caps the number of records; 0 means no limit.
	Limit int
	// After continues a listing: only records whose (CreatedAt, Scope, Key)
	// sorts after this cursor. Zero means from the start.
	After *Cursor
}

// Cursor is a position in a List ordering.
type Cursor struct {
	CreatedAt time.Time
	Scope     string
	Key       string
}

// SweepParams are the inputs of [Store.Sweep].
type SweepParams struct {
	// Now is the time expiry is judged at.
	Now time.Time
	// Limit caps the number of records deleted; 0 means no limit.
	Limit int
}
