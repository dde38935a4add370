package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
)

// The claim's two conditions. A fresh key is claimed by a PutItem that
// holds only while no item has the key; an expired succeeded/failed
// record is taken over by a PutItem that holds only while the item is
// still that record (its fence), still terminal, and still expired at the
// caller's time — so two claimers of one expired key cannot both win, and
// a record TTL has not deleted yet is never replayed past its expiry.
const (
	condFresh    = "attribute_not_exists(#pk)"
	condTakeOver = "#fe = :ofe AND (#st = :suc OR #st = :fai) AND #ex <= :now"
)

// claimTries bounds Claim's loop: each turn is lost only to another
// writer that changed the key in between (released it, took it over).
const claimTries = 16

// Claim implements [idem.Store.Claim] with conditional PutItem calls:
// one for a fresh key (condition attribute_not_exists), and for a
// succeeded/failed record expired at p.Now one more that replaces it
// under fence + 1 (the take-over condition checks, in the same write,
// that the record is still that one and still expired). A key held by a
// live record is answered with that record and nothing is written; where
// DynamoDB does not return the item with the failed condition
// (ReturnValuesOnConditionCheckFailure; dynalite), a strongly consistent
// GetItem reads it.
//
// While recent claims mostly found a record (replays dominate), Claim
// first reads the record (strongly consistent): a replay then costs one
// read and no write — DynamoDB bills a failed conditional write as a
// write. The read decides nothing; the conditional puts do.
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := s.check(); err != nil {
		return idem.ClaimResult{}, err
	}
	var old *idem.Record
	if s.mix.ReadFirst() {
		r, err := s.get(ctx, p.Scope, p.Key)
		switch {
		case errors.Is(err, idem.ErrNotFound):
		case err != nil:
			return idem.ClaimResult{}, storeErr("claim", err)
		case !r.Expired(p.Now):
			s.mix.Observe(true)
			return idem.ClaimResult{Record: *r, Claimed: isOwn(r, &p)}, nil
		default:
			old = r
		}
	}
	for range claimTries {
		var err error
		if old == nil {
			err = s.put(ctx, s.claimItem(&p, 1), condFresh, nil)
			if err == nil {
				s.mix.Observe(false)
				return claimed(&p, 1), nil
			}
		} else {
			vals := stateVals(map[string]types.AttributeValue{":ofe": avN(old.Fence), ":now": avT(p.Now)})
			err = s.put(ctx, s.claimItem(&p, old.Fence+1), condTakeOver, vals)
			if err == nil {
				s.mix.Observe(false)
				return claimed(&p, old.Fence+1), nil
			}
		}
		if !isCondFailed(err) {
			return idem.ClaimResult{}, storeErr("claim", err)
		}
		cur, err := s.condItem(ctx, err, p.Scope, p.Key)
		if err != nil {
			return idem.ClaimResult{}, storeErr("claim", err)
		}
		if cur != nil && !cur.Expired(p.Now) {
			s.mix.Observe(true)
			return idem.ClaimResult{Record: *cur, Claimed: isOwn(cur, &p)}, nil
		}
		old = cur // absent again (released meanwhile), or expired: try again
	}
	return idem.ClaimResult{}, storeErr("claim", fmt.Errorf("dynamostore: key changed under %d claims in a row", claimTries))
}

func claimed(p *idem.ClaimParams, fence int64) idem.ClaimResult {
	return idem.ClaimResult{Claimed: true, Record: idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
		Fence: fence, AttemptID: p.AttemptID, Intent: p.Intent,
		CreatedAt: p.Now.UTC(), LeaseUntil: p.LeaseUntil.UTC(),
	}}
}

// isOwn reports whether r is the caller's own earlier claim, whose answer
// was lost.
func isOwn(r *idem.Record, p *idem.ClaimParams) bool {
	return r.State == idem.StateInProgress && r.AttemptID == p.AttemptID
}

// put writes item under cond.
func (s *Store) put(ctx context.Context, item map[string]types.AttributeValue, cond string, vals map[string]types.AttributeValue) error {
	e := build(vals, cond)
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: item, ConditionExpression: &cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// condItem is the record a write's failed condition found: the item
// DynamoDB returned with the failure, or else a strongly consistent read.
// It returns nil when there is no record.
func (s *Store) condItem(ctx context.Context, err error, scope, key string) (*idem.Record, error) {
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) && len(cf.Item) > 0 {
		return decodeRecord(cf.Item)
	}
	r, err := s.get(ctx, scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		return nil, nil
	}
	return r, err
}
