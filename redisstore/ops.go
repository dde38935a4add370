package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Claim implements [idem.Store.Claim] with one Lua script: the script reads
// the record and, only if it is absent or expired, writes the new claim, so
// claim-or-return-existing is one atomic round trip and a replay writes
// nothing. With Config.Wait set, a successful claim is confirmed durable
// (WAIT/WAITAOF on the same connection) before it is returned.
//
// When recent claims mostly found a live record, Claim first reads the
// record with a plain HMGET (no script): a replay then costs what a raw
// read costs. The read decides nothing; when it finds no live record (or
// an expired one) the script runs and decides as above.
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := s.check(); err != nil {
		return idem.ClaimResult{}, err
	}
	k := s.keysFor(p.Scope, p.Key)
	if s.readFirst && s.mix.ReadFirst() {
		res, done, err := s.claimRead(ctx, k, p)
		if err != nil || done {
			return res, err
		}
	}
	args := []interface{}{encTime(p.Now), p.AttemptID, p.Fingerprint.String(), p.Intent,
		encTime(p.LeaseUntil), p.Scope, p.Key, s.pubCmd}
	res, err := s.claimRun(ctx, k, args)
	if err != nil {
		return idem.ClaimResult{}, storeErr("claim", err)
	}
	status, _ := res[0].(string)
	s.mix.Observe(status != "claimed")
	if status == "claimed" {
		fence, _ := res[1].(int64)
		return idem.ClaimResult{Claimed: true, Record: idem.Record{
			Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
			Fence: fence, AttemptID: p.AttemptID, Intent: p.Intent,
			CreatedAt: utcMicro(p.Now), LeaseUntil: utcMicro(p.LeaseUntil),
		}}, nil
	}
	rec, err := recordFrom("claim", res)
	if err != nil {
		return idem.ClaimResult{}, err
	}
	return idem.ClaimResult{Record: *rec, Claimed: status == "own"}, nil
}

// claimRead is Claim's read-first path. done is true when the read alone
// answers: a live record held by someone else, or (without Config.Wait,
// whose confirmation needs the script's connection) the caller's own
// in_progress claim. Absent and expired records go to the script.
func (s *Store) claimRead(ctx context.Context, k keys, p idem.ClaimParams) (res idem.ClaimResult, done bool, err error) {
	vals, err := s.readFields(ctx, k.rec)
	if err != nil {
		return res, false, storeErr("claim", err)
	}
	rec, err := decodeValues(vals)
	if errors.Is(err, idem.ErrNotFound) {
		return res, false, nil // the script decides, and records the mix
	}
	if err != nil {
		return res, false, storeErr("claim", err)
	}
	if rec.Expired(p.Now) {
		return res, false, nil
	}
	own := rec.State == idem.StateInProgress && rec.AttemptID == p.AttemptID
	if own && s.wait != nil {
		return res, false, nil
	}
	s.mix.Observe(true)
	return idem.ClaimResult{Record: *rec, Claimed: own}, true, nil
}

// claimRun runs the claim script, through a pinned connection followed by
// WAIT/WAITAOF when Config.Wait is set: WAIT counts the writes of the
// connection it runs on, so it must share the claim's connection.
func (s *Store) claimRun(ctx context.Context, k keys, args []interface{}) ([]interface{}, error) {
	keys := []string{k.rec, k.ch}
	if s.wait == nil {
		return claimScript.Run(ctx, s.client, keys, args...).Slice()
	}
	conn, err := s.pinnedConn(ctx, k.rec)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res, err := claimScript.Run(ctx, conn, keys, args...).Slice()
	if err != nil {
		s.onRedirect(ctx, err)
		return nil, err
	}
	if st, _ := res[0].(string); st == "claimed" || st == "own" {
		if err := s.awaitDurable(ctx, conn); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (s *Store) pinnedConn(ctx context.Context, rec string) (*redis.Conn, error) {
	if s.cluster != nil {
		node, err := s.cluster.MasterForKey(ctx, rec)
		if err != nil {
			return nil, err
		}
		return node.Conn(), nil
	}
	return s.client.(*redis.Client).Conn(), nil
}

// onRedirect refreshes the cluster's slot map after a MOVED/ASK reply on a
// pinned connection; the caller's retry (same attempt id) then goes to the
// slot's new owner. The script did not run on a redirect.
func (s *Store) onRedirect(ctx context.Context, err error) {
	if s.cluster == nil {
		return
	}
	if msg := err.Error(); strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") {
		s.cluster.ReloadState(ctx)
	}
}

func (s *Store) awaitDurable(ctx context.Context, conn *redis.Conn) error {
	w := s.wait
	if w.Replicas > 0 {
		n, err := conn.Wait(ctx, w.Replicas, w.Timeout).Result()
		if err != nil {
			return err
		}
		if n < int64(w.Replicas) {
			return fmt.Errorf("%w: WAIT %d acknowledged by %d replicas within %s", ErrNotDurable, w.Replicas, n, w.Timeout)
		}
	}
	if w.AOFLocal > 0 || w.AOFReplicas > 0 {
		n, err := conn.WaitAOF(ctx, w.AOFLocal, w.AOFReplicas, w.Timeout).Result()
		if err != nil {
			return err
		}
		if len(n) != 2 || n[0] < int64(w.AOFLocal) || n[1] < int64(w.AOFReplicas) {
			return fmt.Errorf("%w: WAITAOF %d %d acknowledged by %v within %s", ErrNotDurable, w.AOFLocal, w.AOFReplicas, n, w.Timeout)
		}
	}
	return nil
}

// Finish implements [idem.Store.Finish]. A terminal outcome also sets the
// key's TTL to ExpiresAt plus Config.ExpiryGrace.
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if p.State != idem.StateSucceeded && p.State != idem.StateFailed && p.State != idem.StateUnknown {
		return nil, fmt.Errorf("redisstore: finish: state %q is not succeeded, failed or unknown", p.State)
	}
	expires := p.ExpiresAt
	if p.State == idem.StateUnknown {
		expires = time.Time{}
	}
	res, err := s.run(ctx, "finish", finishScript, p.Scope, p.Key,
		strconv.FormatInt(p.Fence, 10), p.AttemptID, string(p.State), p.Result,
		encTime(p.CompletedAt), encTime(expires), s.pexpireAt(expires), s.pubCmd)
	if err != nil {
		return nil, err
	}
	return recordFrom("finish", res)
}

// Release implements [idem.Store.Release].
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.run(ctx, "release", releaseScript, p.Scope, p.Key,
		strconv.FormatInt(p.Fence, 10), p.AttemptID, s.pubCmd)
	if err != nil {
		return err
	}
	return statusErr("release", res)
}

// Heartbeat implements [idem.Store.Heartbeat].
func (s *Store) Heartbeat(ctx context.Context, p idem.HeartbeatParams) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.run(ctx, "heartbeat", heartbeatScript, p.Scope, p.Key,
		strconv.FormatInt(p.Fence, 10), p.AttemptID, encTime(p.LeaseUntil))
	if err != nil {
		return err
	}
	return statusErr("heartbeat", res)
}

// Resolve implements [idem.Store.Resolve].
func (s *Store) Resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !p.Release && p.To != idem.StateSucceeded && p.To != idem.StateFailed && p.To != idem.StateInProgress {
		return nil, fmt.Errorf("redisstore: resolve: To %q is not succeeded, failed or in_progress", p.To)
	}
	from := []string{string(idem.StateUnknown)}
	if len(p.From) > 0 {
		from = from[:0]
		for _, st := range p.From {
			if !st.Valid() {
				return nil, fmt.Errorf("redisstore: resolve: From holds invalid state %q", st)
			}
			from = append(from, string(st))
		}
	}
	release := "0"
	if p.Release {
		release = "1"
	}
	expires := p.ExpiresAt
	if p.To == idem.StateInProgress {
		expires = time.Time{}
	}
	res, err := s.run(ctx, "resolve", resolveScript, p.Scope, p.Key,
		strconv.FormatInt(p.Fence, 10), strings.Join(from, " "), string(p.To), release,
		p.AttemptID, p.Result, encTime(p.Now), encTime(p.LeaseUntil), encTime(expires),
		s.pexpireAt(expires), s.pubCmd)
	if err != nil {
		return nil, err
	}
	if st, _ := res[0].(string); st == "released" {
		return nil, nil
	}
	return recordFrom("resolve", res)
}

// SetMark implements [idem.Store.SetMark].
func (s *Store) SetMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.run(ctx, "set mark", setMarkScript, scope, key, strconv.FormatInt(fence, 10), string(mark))
	if err != nil {
		return err
	}
	return statusErr("set mark", res)
}

// Get implements [idem.Store.Get] with one HMGET of every field.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	vals, err := s.readFields(ctx, s.keysFor(scope, key).rec)
	if err != nil {
		return nil, storeErr("get", err)
	}
	return decodeValues(vals)
}

// hmgetArgs is HMGET's argument list with a hole for the key: the field
// names are boxed once here instead of on every read.
var hmgetArgs = func() []interface{} {
	a := []interface{}{"hmget", nil}
	for _, f := range recordStrings {
		a = append(a, f)
	}
	return a
}()

// readFields reads every field of the record hash rec, in recordStrings
// order, with one HMGET.
func (s *Store) readFields(ctx context.Context, rec string) ([]interface{}, error) {
	args := make([]interface{}, len(hmgetArgs))
	copy(args, hmgetArgs)
	args[1] = rec
	return s.client.Do(ctx, args...).Slice()
}

// run runs a write script on the record's keys and checks its reply shape.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, scope, key string, args ...interface{}) ([]interface{}, error) {
	k := s.keysFor(scope, key)
	res, err := sc.Run(ctx, s.client, []string{k.rec, k.ch}, args...).Slice()
	if err != nil {
		return nil, storeErr(op, err)
	}
	if len(res) == 0 {
		return nil, storeErr(op, fmt.Errorf("empty script reply"))
	}
	return res, nil
}

// pexpireAt is the key's Redis expiry in Unix ms for a record expiring at t.
func (s *Store) pexpireAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.Add(s.grace).UnixMilli(), 10)
}

// statusErr maps a script's status word to the contract's errors.
func statusErr(op string, res []interface{}) error {
	switch st, _ := res[0].(string); st {
	case "ok", "released":
		return nil
	case "fenced":
		return fmt.Errorf("redisstore: %s: %w", op, idem.ErrFenced)
	case "notfound":
		return fmt.Errorf("redisstore: %s: %w", op, idem.ErrNotFound)
	default:
		return storeErr(op, fmt.Errorf("unexpected script status %v", res[0]))
	}
}

// recordFrom decodes {status, HMGET of every field} replies.
func recordFrom(op string, res []interface{}) (*idem.Record, error) {
	if err := statusErr(op, res); err != nil {
		if st, _ := res[0].(string); st != "own" && st != "exists" {
			return nil, err
		}
	}
	if len(res) < 2 {
		return nil, storeErr(op, fmt.Errorf("script reply without record"))
	}
	vals, _ := res[1].([]interface{})
	rec, err := decodeValues(vals)
	if err != nil {
		return nil, storeErr(op, err)
	}
	return rec, nil
}

func utcMicro(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}
