package natsstore

import (
	"context"
	"errors"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/listorder"
)

// entry is a record as a scan found it, with its KV key and revision.
type entry struct {
	rec *idem.Record
	key string
	rev uint64
}

// scan calls fn with the latest value of every record key matching filter
// (deleted keys left out): an ordered consumer that delivers the last
// message of each subject, read until the end of what was there when it
// started. fn returns false to stop.
func (s *Store) scan(ctx context.Context, filter string, fn func(e entry) (bool, error)) error {
	if _, ok := ctx.Deadline(); !ok { // a scan is many messages: the caller's deadline, if any, bounds it
		var cancel context.CancelFunc
		ctx, cancel = s.bounded(ctx)
		defer cancel()
	}
	w, err := s.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("natsstore: scan: watch closed before its end")
			}
			if e == nil {
				return nil // every value there was at the start has come
			}
			r, err := decodeRecord(e.Value())
			if err != nil {
				return err
			}
			more, err := fn(entry{rec: r, key: e.Key(), rev: e.Revision()})
			if err != nil || !more {
				return err
			}
		}
	}
}

// List implements [idem.Store.List]. It reads every record of the scope
// (of the bucket, without one) and sorts them in Go in listorder's order:
// a KV bucket has no secondary index. Listing is an operator's and the
// reconciler's path, not the request path.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []idem.Record
	err := s.scan(ctx, scopeFilter(f.Scope), func(e entry) (bool, error) {
		r := e.rec
		switch {
		case f.Scope != "" && r.Scope != f.Scope:
		case len(f.States) > 0 && !slices.Contains(f.States, r.State):
		case !f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore):
		case !listorder.After(r, f.After):
		default:
			out = append(out, *r)
		}
		return true, nil
	})
	if err != nil {
		return nil, storeErr("list", err)
	}
	return listorder.Page(out, f.Limit), nil
}

// Sweep implements [idem.Store.Sweep]. It scans the bucket and deletes
// each record that is succeeded or failed and expired at p.Now with a
// delete conditional on the revision it judged: a record re-claimed (or
// resolved) since has another revision, and its delete is refused. The
// bucket itself expires nothing (see the package doc, "Retention").
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	var doomed []entry
	err := s.scan(ctx, scopeFilter(""), func(e entry) (bool, error) {
		if e.rec.Expired(p.Now) {
			doomed = append(doomed, e)
		}
		return true, nil
	})
	if err != nil {
		return 0, storeErr("sweep", err)
	}
	if s.writeGap != nil {
		s.writeGap()
	}
	n := 0
	for _, e := range doomed {
		if p.Limit > 0 && n >= p.Limit {
			break
		}
		err := s.remove(ctx, e.key, e.rev)
		if conflict(err) {
			continue // changed since the scan: no longer this record
		}
		if err != nil {
			return n, storeErr("sweep", err)
		}
		n++
	}
	return n, nil
}
