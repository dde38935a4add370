package pgstore

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// Resolve implements [idem.Store.Resolve] with one conditional UPDATE (or
// DELETE for a release); when it matches nothing, a read tells ErrNotFound
// from ErrFenced. For a release the returned record is nil: there is no
// record any more.
func (o ops) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return nil, errClosed("resolve")
	}
	from := make([]string, 0, len(p.From))
	for _, s := range p.From {
		from = append(from, string(rune(statecode.Of(s))))
	}
	if len(from) == 0 {
		from = append(from, string(rune(statecode.Unknown)))
	}
	var (
		rec      idem.Record
		notified bool
		err      error
	)
	if p.Release {
		args := append([]any{p.Scope, p.Key, from, p.Fence}, o.notifyArgs(p.Scope, p.Key)...)
		_, err = scanRecord(o.db.queryRow(ctx, o.sql.resolveDelete, args...), &notified)
	} else {
		var args []any
		if args, err = resolveArgs(p, from); err != nil {
			return nil, err
		}
		args = append(args, o.notifyArgs(p.Scope, p.Key)...)
		if p.To == idem.StateInProgress && o.st.replicated() {
			// A re-drive claims the key for a new attempt: it waits for
			// the standbys as a claim does, and fails closed likewise.
			err = o.syncWrite(ctx, func(ctx context.Context, q querier) (err error) {
				rec, err = scanRecord(q.queryRow(ctx, o.sql.resolveClaim, args...), &notified)
				return err
			})
		} else {
			rec, err = scanRecord(o.db.queryRow(ctx, o.sql.resolveUpdate, args...), &notified)
		}
	}
	switch {
	case err == nil && p.Release:
		return nil, nil
	case err == nil:
		return &rec, nil
	case !isNoRows(err):
		return nil, wrap("resolve", err)
	}
	return nil, o.notFoundOrFenced(ctx, "resolve", p.Scope, p.Key, p.Fence)
}

// resolveArgs are the parameters of the resolve UPDATE for p.To.
func resolveArgs(p idem.ResolveParams, from []string) ([]any, error) {
	base := []any{p.Scope, p.Key, from, p.Fence, statecode.Of(p.To), encodeAttempt(p.AttemptID)}
	switch p.To {
	case idem.StateSucceeded, idem.StateFailed:
		return append(base, p.Result, nullTime(p.Now), nullTime(p.ExpiresAt), nil), nil
	case idem.StateInProgress:
		return append(base, nil, nil, nil, nullTime(p.LeaseUntil)), nil
	}
	return nil, fmt.Errorf("pgstore: resolve: target state %q is not succeeded, failed or in_progress", p.To)
}

// SetMark implements [idem.Store.SetMark] in one statement.
func (o ops) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	ctx, cancel := o.bound(ctx)
	defer cancel()
	if o.st.closed.Load() {
		return errClosed("set mark")
	}
	var updated int64
	var exists bool
	if err := o.db.queryRow(ctx, o.sql.setMark, scope, key, fence, string(mark)).Scan(&updated, &exists); err != nil {
		return wrap("set mark", err)
	}
	switch {
	case updated > 0:
		return nil
	case exists:
		return fenced("set mark", scope, key, fence)
	}
	return idem.ErrNotFound
}
