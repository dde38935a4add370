package natsstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// scan returns the latest value of every record key matching filter
// (deleted keys left out), as of no earlier than its start: an ordered
// consumer delivering the last message of each subject, read until the
// message the stream's leader held last for filter when the scan began
// has come.
//
// The watch's own end-of-initial-values marker is not enough on a
// replicated bucket: it comes when the consumer has delivered what was
// pending at its creation, counted on the replica the consumer was placed
// on, and a replica that lags the leader counts too little (no message at
// all, right after a burst of writes) — the scan would end with records
// missing. So scan first asks the leader for the filter's last sequence
// and reads on, past the marker, until a message at or beyond it has
// arrived (the consumer delivers in stream order); a replica still
// catching up delays the scan, bounded by ctx, instead of cutting it
// short. A key whose value changed during the scan may be delivered twice
// (its stale value, then its new one); the later revision wins.
func (s *Store) scan(ctx context.Context, filter string) ([]entry, error) {
	if _, ok := ctx.Deadline(); !ok { // a scan is many messages: the caller's deadline, if any, bounds it
		var cancel context.CancelFunc
		ctx, cancel = s.bounded(ctx)
		defer cancel()
	}
	last, err := s.lastSeq(ctx, filter)
	if err != nil {
		return nil, err
	}
	watch := s.kv.Watch
	if s.scanWatch != nil {
		watch = s.scanWatch
	}
	// Deletes are delivered too: a key's tombstone may be the message
	// the scan waits for, and it hides the key's earlier value.
	w, err := watch(ctx, filter)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	latest := make(map[string]jetstream.KeyValueEntry)
	var seen uint64 // the highest revision delivered
	marked := false // the watch's end-of-initial-values marker has come
	for !marked || seen < last {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("natsstore: scan: watch closed before its end")
			}
			if e == nil {
				marked = true
				continue
			}
			seen = max(seen, e.Revision())
			if p, ok := latest[e.Key()]; !ok || e.Revision() > p.Revision() {
				latest[e.Key()] = e
			}
		}
	}
	out := make([]entry, 0, len(latest))
	for k, e := range latest {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		r, err := decodeRecord(e.Value())
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
		out = append(out, entry{rec: r, key: k, rev: e.Revision()})
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.rev, b.rev) }) // stream order, as delivered
	return out, nil
}

// List implements [idem.Store.List]. It reads every record of the scope
// (of the bucket, without one) and sorts them in Go in listorder's order:
// a KV bucket has no secondary index. Listing is an operator's and the
// reconciler's path, not the request path.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	all, err := s.scan(ctx, scopeFilter(f.Scope))
	if err != nil {
		return nil, storeErr("list", err)
	}
	var out []idem.Record
	for _, e := range all {
		r := e.rec
		switch {
		case f.Scope != "" && r.Scope != f.Scope:
		case len(f.States) > 0 && !slices.Contains(f.States, r.State):
		case !f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore):
		case !listorder.After(r, f.After):
		default:
			out = append(out, *r)
		}
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
	all, err := s.scan(ctx, scopeFilter(""))
	if err != nil {
		return 0, storeErr("sweep", err)
	}
	var doomed []entry
	for _, e := range all {
		if e.rec.Expired(p.Now) {
			doomed = append(doomed, e)
		}
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
