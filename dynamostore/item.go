package dynamostore

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
)

// The attributes of a record's item. Names are short because DynamoDB
// bills writes by item size (1 KB units) and every name is stored in
// every item and in every index copy of it.
const (
	attrPK          = "pk"  // S: the table's partition key, pkOf(scope, key)
	attrScope       = "sc"  // S
	attrKey         = "ky"  // S
	attrFingerprint = "fp"  // B: 32 bytes
	attrState       = "st"  // S: idem.State
	attrFence       = "fe"  // N
	attrAttempt     = "at"  // S
	attrIntent      = "in"  // B, absent when empty
	attrResult      = "rs"  // B, absent when empty
	attrMark        = "mk"  // S, absent when none
	attrCreated     = "ca"  // N: Unix microseconds; the state index's sort key
	attrLease       = "lu"  // N: Unix microseconds
	attrCompleted   = "co"  // N: Unix microseconds, absent before an outcome
	attrExpires     = "ex"  // N: Unix microseconds, terminal records only; the expiry index's sort key
	attrTTL         = "ttl" // N: Unix seconds, ExpiresAt + TTLGrace, terminal records only
	attrStateShard  = "gs"  // S: "<state>#<shard>", the state index's partition key
	attrExpiryShard = "xs"  // S: "x#<shard>", terminal records only: the expiry index's partition key
)

// The table's secondary indexes.
const (
	// IndexStateAge is the global secondary index List reads: partition key
	// gs ("<state>#<shard>"), sort key ca (CreatedAt), all attributes
	// projected.
	IndexStateAge = "idem-state-age"
	// IndexExpiry is the sparse global secondary index Sweep reads: only
	// succeeded and failed records carry its keys, xs ("x#<shard>") and ex
	// (ExpiresAt); keys only projected.
	IndexExpiry = "idem-expiry"
)

// pkOf is the item's partition key: the scope's length, a colon, the
// scope, then the key. The length prefix makes it unambiguous for any
// scope and key.
func pkOf(scope, key string) string {
	return strconv.Itoa(len(scope)) + ":" + scope + key
}

// shardOf spreads the records of one state over n index partitions, so
// that no single partition key of an index takes every write of a busy
// table (one partition key of a GSI takes at most 1,000 writes a second).
func shardOf(pk string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pk))
	return int(h.Sum32() % uint32(n))
}

func stateShard(st idem.State, shard int) string { return string(st) + "#" + strconv.Itoa(shard) }
func expiryShard(shard int) string               { return "x#" + strconv.Itoa(shard) }

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avB(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func avT(t time.Time) types.AttributeValue { return avN(t.UnixMicro()) }

// ttlSeconds is the TTL attribute for a record expiring at exp: DynamoDB
// deletes the item some time after it (hours to days), never before.
func ttlSeconds(exp time.Time, grace time.Duration) int64 {
	t := exp.Add(grace)
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// claimItem is the item of a new in_progress claim at fence.
func (s *Store) claimItem(p *idem.ClaimParams, fence int64) map[string]types.AttributeValue {
	pk := pkOf(p.Scope, p.Key)
	it := map[string]types.AttributeValue{
		attrPK:          avS(pk),
		attrScope:       avS(p.Scope),
		attrKey:         avS(p.Key),
		attrFingerprint: avB(p.Fingerprint[:]),
		attrState:       avS(string(idem.StateInProgress)),
		attrFence:       avN(fence),
		attrAttempt:     avS(p.AttemptID),
		attrCreated:     avT(p.Now),
		attrLease:       avT(p.LeaseUntil),
		attrStateShard:  avS(stateShard(idem.StateInProgress, shardOf(pk, s.shards))),
	}
	if len(p.Intent) > 0 {
		it[attrIntent] = avB(p.Intent)
	}
	return it
}

// errBadItem is wrapped by the error for an item this store cannot read
// as a record: written by something else, or damaged.
var errBadItem = errors.New("dynamostore: item is not an idem record")

// decodeRecord reads a record from an item.
func decodeRecord(it map[string]types.AttributeValue) (*idem.Record, error) {
	var r idem.Record
	var err error
	str := func(name string, required bool) string {
		v, ok := it[name].(*types.AttributeValueMemberS)
		if !ok {
			if required && err == nil {
				err = fmt.Errorf("%w: attribute %s missing or not a string", errBadItem, name)
			}
			return ""
		}
		return v.Value
	}
	num := func(name string, required bool) int64 {
		v, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			if required && err == nil {
				err = fmt.Errorf("%w: attribute %s missing or not a number", errBadItem, name)
			}
			return 0
		}
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("%w: attribute %s: %v", errBadItem, name, perr)
		}
		return n
	}
	bin := func(name string) []byte {
		if v, ok := it[name].(*types.AttributeValueMemberB); ok && len(v.Value) > 0 {
			return v.Value
		}
		return nil
	}
	tm := func(name string, required bool) time.Time {
		if _, ok := it[name]; !ok && !required {
			return time.Time{}
		}
		return time.UnixMicro(num(name, true)).UTC()
	}
	r.Scope = str(attrScope, true)
	r.Key = str(attrKey, true)
	if fp := bin(attrFingerprint); len(fp) == len(r.Fingerprint) {
		copy(r.Fingerprint[:], fp)
	} else if err == nil {
		err = fmt.Errorf("%w: fingerprint of %d bytes", errBadItem, len(fp))
	}
	st, serr := idem.ParseState(str(attrState, true))
	if serr != nil && err == nil {
		err = fmt.Errorf("%w: %v", errBadItem, serr)
	}
	r.State = st
	r.Fence = num(attrFence, true)
	r.AttemptID = str(attrAttempt, true)
	r.Intent = bin(attrIntent)
	r.Result = bin(attrResult)
	r.Mark = idem.Mark(str(attrMark, false))
	r.CreatedAt = tm(attrCreated, true)
	r.LeaseUntil = tm(attrLease, false)
	r.CompletedAt = tm(attrCompleted, false)
	r.ExpiresAt = tm(attrExpires, false)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// expr is one request's expressions with the names and values they use.
// A name is written #attr and stands for the attribute attr; a value is
// written :name. DynamoDB refuses a request that declares a name or a
// value its expressions do not use, so build keeps only those used.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

// build collects the #names and :values used by exprs from vals.
func build(vals map[string]types.AttributeValue, exprs ...string) expr {
	e := expr{names: map[string]string{}}
	for _, x := range exprs {
		for i := 0; i < len(x); i++ {
			c := x[i]
			if c != '#' && c != ':' {
				continue
			}
			j := i + 1
			for j < len(x) && (x[j] == '_' || x[j] >= 'a' && x[j] <= 'z' || x[j] >= 'A' && x[j] <= 'Z' || x[j] >= '0' && x[j] <= '9') {
				j++
			}
			tok := x[i:j]
			if c == '#' {
				e.names[tok] = tok[1:]
			} else if v, ok := vals[tok]; ok {
				if e.values == nil {
					e.values = map[string]types.AttributeValue{}
				}
				e.values[tok] = v
			}
			i = j - 1
		}
	}
	if len(e.names) == 0 {
		e.names = nil
	}
	return e
}

// stateVals are the state constants every condition may use.
func stateVals(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	m[":inp"] = avS(string(idem.StateInProgress))
	m[":unk"] = avS(string(idem.StateUnknown))
	m[":suc"] = avS(string(idem.StateSucceeded))
	m[":fai"] = avS(string(idem.StateFailed))
	return m
}

// keyOf is the primary key of (scope, key).
func keyOf(scope, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: avS(pkOf(scope, key))}
}

func validShards(n int) bool { return n >= 1 && n <= 1000 }
