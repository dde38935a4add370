package dynamostore

import (
	"context"
	"errors"
	"math"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/listorder"
)

// Get implements [idem.Store.Get] with a strongly consistent GetItem: an
// eventually consistent read could miss a claim or an outcome written a
// moment ago, and a duplicate would then claim again or replay stale.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	r, err := s.get(ctx, scope, key)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return nil, storeErr("get", err)
	}
	return r, err
}

func (s *Store) get(ctx context.Context, scope, key string) (*idem.Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: keyOf(scope, key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, idem.ErrNotFound
	}
	return decodeRecord(out.Item)
}

// List implements [idem.Store.List] by querying the idem-state-age index,
// one query per state and shard, bounded by the filter's times in the key
// condition (never a table scan), and merging the answers in Go. The
// index is eventually consistent, as every global secondary index is: a
// record written a moment ago may be missing or show its previous state.
// List is the operators' and the reconciler's path, never the engine's.
func (s *Store) List(ctx context.Context, f idem.ListFilter) ([]idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	states := f.States
	if len(states) == 0 {
		states = []idem.State{idem.StateInProgress, idem.StateSucceeded, idem.StateFailed, idem.StateUnknown}
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if f.After != nil {
		lo = f.After.CreatedAt.UnixMicro()
	}
	if !f.CreatedBefore.IsZero() {
		hi = f.CreatedBefore.UnixMicro() - 1
	}
	var out []idem.Record
	for _, st := range slices.Compact(slices.Sorted(slices.Values(states))) {
		if !st.Valid() {
			continue
		}
		for sh := range s.shards {
			recs, err := s.listPartition(ctx, stateShard(st, sh), lo, hi, &f)
			if err != nil {
				return nil, storeErr("list", err)
			}
			out = append(out, recs...)
		}
	}
	return listorder.Page(out, f.Limit), nil
}

// listPartition reads one partition of the state index in CreatedAt
// order: the records after f.After and in [lo, hi], at most f.Limit of
// them plus those that tie with the last on CreatedAt (their order by
// scope and key is decided after the merge).
func (s *Store) listPartition(ctx context.Context, part string, lo, hi int64, f *idem.ListFilter) ([]idem.Record, error) {
	if lo > hi {
		return nil, nil
	}
	vals := map[string]types.AttributeValue{":gs": avS(part), ":lo": avN(lo), ":hi": avN(hi), ":sc": avS(f.Scope)}
	keyCond := "#gs = :gs AND #ca BETWEEN :lo AND :hi"
	var filter *string
	if f.Scope != "" {
		filter = aws.String("#sc = :sc")
	}
	exprs := []string{keyCond}
	if filter != nil {
		exprs = append(exprs, *filter)
	}
	e := build(vals, exprs...)
	in := &dynamodb.QueryInput{
		TableName: s.table, IndexName: aws.String(IndexStateAge),
		KeyConditionExpression: &keyCond, FilterExpression: filter,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	}
	if f.Limit > 0 {
		in.Limit = aws.Int32(int32(min(f.Limit+1, 1000)))
	}
	var out []idem.Record
	boundary := int64(math.MinInt64)
	for {
		page, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			r, err := decodeRecord(it)
			if err != nil {
				return nil, err
			}
			if !listorder.After(r, f.After) {
				continue
			}
			ca := r.CreatedAt.UnixMicro()
			if f.Limit > 0 && len(out) >= f.Limit && ca > boundary {
				return out, nil
			}
			out = append(out, *r)
			if f.Limit > 0 && len(out) == f.Limit {
				boundary = ca
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Sweep implements [idem.Store.Sweep]: it queries the sparse idem-expiry
// index (only succeeded and failed records are in it) for records expired
// at p.Now, and deletes each with a DeleteItem whose condition checks
// again, in the same write, that the record is succeeded or failed and
// expired at p.Now — so a record re-claimed since the index was read is
// never removed. DynamoDB's TTL deletes the same records on its own
// schedule (often hours, at times days, late); Sweep removes them on
// time, and Claim never replays one either way.
func (s *Store) Sweep(ctx context.Context, p idem.SweepParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n := 0
	now := p.Now.UnixMicro()
	for sh := range s.shards {
		if p.Limit > 0 && n >= p.Limit {
			break
		}
		vals := stateVals(map[string]types.AttributeValue{":xs": avS(expiryShard(sh)), ":now": avN(now)})
		keyCond := "#xs = :xs AND #ex <= :now"
		e := build(vals, keyCond)
		in := &dynamodb.QueryInput{
			TableName: s.table, IndexName: aws.String(IndexExpiry),
			KeyConditionExpression:   &keyCond,
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		}
		for {
			if p.Limit > 0 {
				in.Limit = aws.Int32(int32(min(p.Limit-n, 1000)))
			}
			page, err := s.api.Query(ctx, in)
			if err != nil {
				return n, storeErr("sweep", err)
			}
			for _, it := range page.Items {
				ok, err := s.sweepOne(ctx, it[attrPK], vals)
				if err != nil {
					return n, storeErr("sweep", err)
				}
				if ok {
					n++
				}
			}
			if len(page.LastEvaluatedKey) == 0 || (p.Limit > 0 && n >= p.Limit) {
				break
			}
			in.ExclusiveStartKey = page.LastEvaluatedKey
		}
	}
	return n, nil
}

// condSweep is the sweeper's delete condition: terminal and expired, in
// the same write as the delete.
const condSweep = "(#st = :suc OR #st = :fai) AND #ex <= :now"

// sweepOne deletes the item with primary key pk if it is still terminal
// and expired; ok is false when it no longer is.
func (s *Store) sweepOne(ctx context.Context, pk types.AttributeValue, vals map[string]types.AttributeValue) (bool, error) {
	if pk == nil {
		return false, nil
	}
	e := build(vals, condSweep)
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: s.table, Key: map[string]types.AttributeValue{attrPK: pk},
		ConditionExpression:      aws.String(condSweep),
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	})
	if isCondFailed(err) {
		return false, nil
	}
	return err == nil, err
}
