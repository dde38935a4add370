package dynamostore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
)

// The fenced writes' conditions: each holds only while the item is held
// by the writer's attempt at the writer's fence, in the state the write
// may leave.
const (
	condHolds      = "#fe = :fe AND #at = :at"
	condFinishTerm = condHolds + " AND (#st = :inp OR #st = :unk)"
	condFinishUnk  = condHolds + " AND #st = :inp"
	condRelease    = condHolds + " AND (#st = :inp OR #st = :unk)"
	condHeartbeat  = condHolds + " AND #st = :inp"
)

// Finish implements [idem.Store.Finish] with one UpdateItem conditioned
// on the fence, the attempt and the state (in_progress or unknown for an
// outcome, in_progress for unknown). When the condition fails, the record
// is read: one that already holds exactly this outcome for this fence and
// attempt (a retried write whose answer was lost) is returned; anything
// else is idem.ErrFenced.
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	pk := pkOf(p.Scope, p.Key)
	vals := stateVals(map[string]types.AttributeValue{
		":fe": avN(p.Fence), ":at": avS(p.AttemptID), ":st": avS(string(p.State)),
		":co": avT(p.CompletedAt), ":gs": avS(stateShard(p.State, shardOf(pk, s.shards))),
	})
	var cond string
	set := []string{"#st = :st", "#co = :co", "#gs = :gs"}
	var remove []string
	switch {
	case p.State.Terminal():
		cond = condFinishTerm
		set, remove = s.terminalSets(set, pk, p.Result, p.ExpiresAt, vals)
	case p.State == idem.StateUnknown:
		cond = condFinishUnk
	default:
		return nil, fmt.Errorf("dynamostore: Finish: state %q is not succeeded, failed or unknown", p.State)
	}
	out, err := s.update(ctx, pk, updateExpr(set, remove), cond, vals)
	if err == nil {
		return decodeRecord(out)
	}
	if !isCondFailed(err) {
		return nil, storeErr("finish", err)
	}
	cur, err := s.condItem(ctx, err, p.Scope, p.Key)
	if err != nil {
		return nil, storeErr("finish", err)
	}
	if cur != nil && cur.Fence == p.Fence && cur.AttemptID == p.AttemptID && cur.State == p.State &&
		(p.State == idem.StateUnknown || bytes.Equal(cur.Result, p.Result)) {
		return cur, nil // a retried write whose answer was lost
	}
	return nil, idem.ErrFenced
}

// terminalSets adds to set (and returns what to remove) the attributes of
// a succeeded or failed record: result, expiry, the TTL attribute and the
// expiry index's partition key.
func (s *Store) terminalSets(set []string, pk string, result []byte, expires time.Time, vals map[string]types.AttributeValue) ([]string, []string) {
	var remove []string
	vals[":ex"] = avT(expires)
	vals[":ttl"] = avN(ttlSeconds(expires, s.grace))
	vals[":xs"] = avS(expiryShard(shardOf(pk, s.shards)))
	set = append(set, "#ex = :ex", "#ttl = :ttl", "#xs = :xs")
	if len(result) > 0 {
		vals[":rs"] = avB(result)
		set = append(set, "#rs = :rs")
	} else {
		remove = append(remove, "#rs")
	}
	return set, remove
}

func updateExpr(set, remove []string) string {
	var b strings.Builder
	if len(set) > 0 {
		b.WriteString("SET ")
		b.WriteString(strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("REMOVE ")
		b.WriteString(strings.Join(remove, ", "))
	}
	return b.String()
}

// update runs one conditional UpdateItem and returns the item after it.
func (s *Store) update(ctx context.Context, pk, upd, cond string, vals map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	e := build(vals, upd, cond)
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: map[string]types.AttributeValue{attrPK: avS(pk)},
		UpdateExpression: &upd, ConditionExpression: &cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// deleteIf runs one conditional DeleteItem.
func (s *Store) deleteIf(ctx context.Context, pk, cond string, vals map[string]types.AttributeValue) error {
	e := build(vals, cond)
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: s.table, Key: map[string]types.AttributeValue{attrPK: avS(pk)},
		ConditionExpression:      &cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// Release implements [idem.Store.Release] with a DeleteItem conditioned
// on the fence, the attempt and an in_progress or unknown state. A
// failed condition on an absent item is a retried release: success.
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	if err := s.check(); err != nil {
		return err
	}
	vals := stateVals(map[string]types.AttributeValue{":fe": avN(p.Fence), ":at": avS(p.AttemptID)})
	err := s.deleteIf(ctx, pkOf(p.Scope, p.Key), condRelease, vals)
	if err == nil {
		return nil
	}
	if !isCondFailed(err) {
		return storeErr("release", err)
	}
	cur, err := s.condItem(ctx, err, p.Scope, p.Key)
	if err != nil {
		return storeErr("release", err)
	}
	if cur == nil {
		return nil
	}
	return idem.ErrFenced
}

// Heartbeat implements [idem.Store.Heartbeat] with an UpdateItem of the
// lease conditioned on the fence, the attempt and the in_progress state.
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if err := s.check(); err != nil {
		return err
	}
	vals := stateVals(map[string]types.AttributeValue{":fe": avN(p.Fence), ":at": avS(p.AttemptID), ":lu": avT(p.LeaseUntil)})
	e := build(vals, "SET #lu = :lu", condHeartbeat)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: keyOf(p.Scope, p.Key),
		UpdateExpression: aws.String("SET #lu = :lu"), ConditionExpression: aws.String(condHeartbeat),
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	})
	switch {
	case err == nil:
		return nil
	case isCondFailed(err):
		return idem.ErrFenced
	}
	return storeErr("heartbeat", err)
}

// Resolve implements [idem.Store.Resolve] with one UpdateItem (or, to
// release, one DeleteItem) conditioned on the record's state being one of
// p.From and, when p.Fence is set, on its fence. The fence grows by one
// in the same write.
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	from := p.From
	if len(from) == 0 {
		from = []idem.State{idem.StateUnknown}
	}
	pk := pkOf(p.Scope, p.Key)
	vals := map[string]types.AttributeValue{":fe": avN(p.Fence)}
	alts := make([]string, len(from))
	for i, st := range from {
		name := ":f" + strconv.Itoa(i)
		vals[name] = avS(string(st))
		alts[i] = "#st = " + name
	}
	cond := "(" + strings.Join(alts, " OR ") + ")"
	if p.Fence != 0 {
		cond += " AND #fe = :fe"
	}
	var err error
	var out map[string]types.AttributeValue
	if p.Release {
		err = s.deleteIf(ctx, pk, cond, vals)
	} else {
		var set, remove []string
		set, remove, err = s.resolveSets(pk, &p, vals)
		if err != nil {
			return nil, err
		}
		out, err = s.update(ctx, pk, updateExpr(set, remove), cond, vals)
	}
	if err != nil {
		if !isCondFailed(err) {
			return nil, storeErr("resolve", err)
		}
		cur, err := s.condItem(ctx, err, p.Scope, p.Key)
		switch {
		case err != nil:
			return nil, storeErr("resolve", err)
		case cur == nil:
			return nil, idem.ErrNotFound
		}
		return nil, idem.ErrFenced
	}
	if p.Release {
		return nil, nil
	}
	return decodeRecord(out)
}

// resolveSets builds Resolve's update: a new fence and attempt, and the
// attributes of the state it moves to.
func (s *Store) resolveSets(pk string, p *idem.ResolveParams, vals map[string]types.AttributeValue) (set, remove []string, err error) {
	vals[":one"] = avN(1)
	vals[":at"] = avS(p.AttemptID)
	vals[":to"] = avS(string(p.To))
	vals[":gs"] = avS(stateShard(p.To, shardOf(pk, s.shards)))
	set = []string{"#fe = #fe + :one", "#at = :at", "#st = :to", "#gs = :gs"}
	switch {
	case p.To == idem.StateInProgress:
		vals[":lu"] = avT(p.LeaseUntil)
		set = append(set, "#lu = :lu")
		remove = []string{"#co", "#rs", "#ex", "#ttl", "#xs"}
	case p.To.Terminal():
		vals[":co"] = avT(p.Now)
		set = append(set, "#co = :co")
		set, remove = s.terminalSets(set, pk, p.Result, p.ExpiresAt, vals)
	default:
		return nil, nil, fmt.Errorf("dynamostore: Resolve: To %q is not succeeded, failed or in_progress", p.To)
	}
	return set, remove, nil
}

// SetMark implements [idem.Store.SetMark] with an UpdateItem conditioned
// on the fence.
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	if err := s.check(); err != nil {
		return err
	}
	vals := map[string]types.AttributeValue{":fe": avN(fence), ":mk": avS(string(mark))}
	upd := "SET #mk = :mk"
	if mark == idem.MarkNone {
		upd = "REMOVE #mk"
	}
	_, err := s.update(ctx, pkOf(scope, key), upd, "#fe = :fe", vals)
	if err == nil {
		return nil
	}
	if !isCondFailed(err) {
		return storeErr("mark", err)
	}
	cur, err := s.condItem(ctx, err, scope, key)
	switch {
	case err != nil:
		return storeErr("mark", err)
	case cur == nil:
		return idem.ErrNotFound
	}
	return idem.ErrFenced
}
