package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// Claim implements [idem.Store.Claim]. On Redis 7.0+ it is one plain
// command, SET key value NX GET: it writes the new in_progress record only
// if the key is free and otherwise answers with the stored value, writing
// nothing, so claim-or-return-existing is one atomic round trip without a
// script. The rare stored value that is terminal and expired at p.Now goes
// to the claim script, which re-checks and takes the key over under fence
// + 1. Servers without SET NX GET run the claim script for every claim.
// With Config.Wait set, a successful claim is confirmed durable
// (WAIT/WAITAOF on the same connection) before it is returned.
//
// When recent claims mostly found a live record, Claim first reads the
// record with a plain GET: a replay then sends no record. The read decides
// nothing; when it finds no live record (or an expired one) the claim runs
// and decides as above.
func (s *Store) Claim(ctx context.Context, p idem.ClaimParams) (idem.ClaimResult, error) {
	if err := s.check(); err != nil {
		return idem.ClaimResult{}, err
	}
	rec := s.recKey(p.Scope, p.Key)
	if s.readFirst && s.mix.ReadFirst() {
		res, done, err := s.claimRead(ctx, rec, &p)
		if err != nil || done {
			return res, err
		}
	}
	fence, stored, err := s.claimRun(ctx, rec, &p)
	if err != nil {
		return idem.ClaimResult{}, storeErr("claim", wrongType(s.noteErr(err)))
	}
	s.mix.Observe(fence == 0)
	if fence != 0 {
		return idem.ClaimResult{Claimed: true, Record: idem.Record{
			Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StateInProgress,
			Fence: fence, AttemptID: p.AttemptID, Intent: p.Intent,
			CreatedAt: utcMicro(p.Now), LeaseUntil: utcMicro(p.LeaseUntil),
		}}, nil
	}
	return idem.ClaimResult{Record: *stored, Claimed: isOwn(stored, &p)}, nil
}

// isOwn reports whether r is the caller's own earlier claim, whose answer
// was lost.
func isOwn(r *idem.Record, p *idem.ClaimParams) bool {
	return r.State == idem.StateInProgress && r.AttemptID == p.AttemptID
}

// claimRead is Claim's read-first path. done is true when the read alone
// answers: a live record held by someone else, or (without Config.Wait,
// whose confirmation needs the claim's connection) the caller's own
// in_progress claim. Absent and expired records go to the claim.
func (s *Store) claimRead(ctx context.Context, rec string, p *idem.ClaimParams) (res idem.ClaimResult, done bool, err error) {
	r, err := s.read(ctx, rec)
	if errors.Is(err, idem.ErrNotFound) {
		return res, false, nil // the claim decides, and records the mix
	}
	if err != nil {
		return res, false, storeErr("claim", s.noteErr(err))
	}
	if r.Expired(p.Now) {
		return res, false, nil
	}
	own := isOwn(r, p)
	if own && s.wait != nil {
		return res, false, nil
	}
	s.mix.Observe(true)
	return idem.ClaimResult{Record: *r, Claimed: own}, true, nil
}

// claimRun claims rec. It returns the fence written, or 0 and the stored
// record it found live. With Config.Wait set it runs on a pinned
// connection followed by WAIT/WAITAOF: WAIT counts the writes of the
// connection it runs on, so it must share the claim's connection. On
// Redis 7.0+ with a WAIT count, the claim, the WAIT and (for
// AllReplicas) the ROLE go in one pipeline: see claimAndWait.
func (s *Store) claimRun(ctx context.Context, rec string, p *idem.ClaimParams) (int64, *idem.Record, error) {
	if s.wait == nil {
		return s.claimOn(ctx, s.client, rec, p)
	}
	conn, node, err := s.pinnedConn(ctx, rec)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	var fence int64
	var stored *idem.Record
	waited := false
	if s.pipelineWait {
		fence, stored, waited, err = s.claimAndWait(ctx, conn, node, rec, p)
	} else {
		// A redirect (MOVED, ASK) on the pinned connection: the claim
		// did not run; Claim's noteErr reloads the slot map, and the
		// caller's retry (same attempt id) goes to the slot's owner.
		fence, stored, err = s.claimOn(ctx, conn, rec, p)
	}
	if err == nil && !waited && (fence != 0 || isOwn(stored, p)) {
		err = s.awaitDurable(ctx, conn)
	}
	if err != nil {
		if errors.Is(err, ErrNotDurable) {
			held := fence
			if held == 0 && stored != nil {
				held = stored.Fence
			}
			s.releaseNotDurable(ctx, p, held)
		}
		return 0, nil, err
	}
	return fence, stored, nil
}

// claimAndWait claims rec and confirms it in one round trip: SET NX GET,
// then WAIT for as many replicas as the primary counted the last time
// (AllReplicas, at least MinReplicas) or for WaitConfig.Replicas, then
// ROLE (AllReplicas), pipelined on conn. When ROLE shows more replicas
// than were waited for, one more WAIT covers them; when it shows fewer (a
// replica left), the acknowledgements of those that remain suffice.
// WAIT's answer is ignored for a record held by someone else (a replay).
// waited is false when the stored record was expired: the claim script
// then took it over, and the caller waits as usual.
func (s *Store) claimAndWait(ctx context.Context, conn *redis.Conn, node, rec string, p *idem.ClaimParams) (fence int64, stored *idem.Record, waited bool, err error) {
	w := s.wait
	want := w.Replicas
	var count *atomic.Int64
	if w.Replicas == AllReplicas {
		count = s.replicaCount(node)
		want = max(int(count.Load()), w.MinReplicas)
	}
	var set, wait, role *redis.Cmd
	// Each command's reply is read below; Pipelined's error is the first
	// of them (redis.Nil for a fresh claim) or the connection's.
	_, _ = conn.Pipelined(ctx, func(pl redis.Pipeliner) error {
		set = pl.Do(ctx, "set", rec, appendNewClaimValue(nil, p), "nx", "get")
		wait = pl.Do(ctx, "wait", want, w.Timeout.Milliseconds())
		if count != nil {
			role = pl.Do(ctx, "role")
		}
		return nil
	})
	v, err := set.Text()
	switch {
	case err == redis.Nil:
		fence = 1
	case err != nil:
		return 0, nil, false, err
	default:
		r, err := decodeRecord(v)
		if err != nil {
			return 0, nil, false, err
		}
		if r.Expired(p.Now) {
			fence, stored, err = s.claimOn(ctx, conn, rec, p)
			return fence, stored, false, err
		}
		if !isOwn(r, p) {
			return 0, r, true, nil
		}
		stored = r
	}
	acked, err := wait.Int64()
	if err != nil {
		return fence, stored, true, err
	}
	need := want
	if count != nil {
		online, err := roleReplicas(role.Val(), role.Err())
		if err != nil {
			return fence, stored, true, err
		}
		count.Store(int64(online))
		need = max(online, w.MinReplicas)
		if acked < int64(need) && need > want {
			if acked, err = conn.Wait(ctx, need, w.Timeout).Result(); err != nil {
				return fence, stored, true, err
			}
		}
	}
	if acked < int64(need) {
		return fence, stored, true, fmt.Errorf("%w: WAIT %d (every connected replica, at least min_replicas %d) acknowledged by %d within %s",
			ErrNotDurable, need, w.MinReplicas, acked, w.Timeout)
	}
	return fence, stored, true, nil
}

// replicaCount is the count of online replicas the primary at node (""
// for the one primary of a standalone or Sentinel client) had at its
// last ROLE.
func (s *Store) replicaCount(node string) *atomic.Int64 {
	if c, ok := s.replicas.Load(node); ok {
		return c.(*atomic.Int64)
	}
	c, _ := s.replicas.LoadOrStore(node, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// releaseNotDurable releases the caller's claim (fence) that was not
// confirmed durable: no effect ran under it (the caller never heard
// "claimed"), so the key is free again at once for a retry, instead of
// held in_progress until its lease passes and then reported unknown. It
// is best effort: a claim it cannot release stays in_progress, as
// before, and is the caller's own on a retry of the same attempt.
func (s *Store) releaseNotDurable(ctx context.Context, p *idem.ClaimParams, fence int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait.Timeout)
	defer cancel()
	_ = s.Release(ctx, idem.ReleaseParams{Scope: p.Scope, Key: p.Key, Fence: fence, AttemptID: p.AttemptID})
}

// claimConn is what a claim runs on: the client, or a pinned connection.
type claimConn interface {
	redis.Scripter
	Do(ctx context.Context, args ...interface{}) *redis.Cmd
}

// rawDoer is implemented by go-redis's clients and connections (not by
// the UniversalClient interface).
type rawDoer interface {
	DoRaw(ctx context.Context, args ...interface{}) *redis.RawCmd
}

// claimOn runs the claim on c: SET NX GET, then the claim script only for
// an expired record; or the claim script alone on servers without SET NX
// GET.
func (s *Store) claimOn(ctx context.Context, c claimConn, rec string, p *idem.ClaimParams) (int64, *idem.Record, error) {
	if s.setNXGet {
		v, found, err := s.claimSetNXGet(ctx, c, rec, p)
		if err != nil {
			return 0, nil, err
		}
		if !found {
			return 1, nil, nil
		}
		r, err := decodeRecord(v)
		if err != nil {
			return 0, nil, err
		}
		if !r.Expired(p.Now) {
			return 0, r, nil
		}
	}
	pre, post := claimValue(p)
	res, err := claimScript.Run(ctx, c, []string{rec}, encTime(p.Now), pre, post).Result()
	if err != nil {
		return 0, nil, err
	}
	switch v := res.(type) {
	case int64:
		return v, nil, nil
	case string:
		r, err := decodeRecord(v)
		return 0, r, err
	}
	return 0, nil, fmt.Errorf("unexpected claim script reply %T", res)
}

// pinnedConn returns a connection to rec's primary, and the primary's
// address in a Cluster ("" otherwise).
func (s *Store) pinnedConn(ctx context.Context, rec string) (*redis.Conn, string, error) {
	if s.cluster != nil {
		node, err := s.cluster.MasterForKey(ctx, rec)
		if err != nil {
			return nil, "", err
		}
		return node.Conn(), node.Options().Addr, nil
	}
	return s.client.(*redis.Client).Conn(), "", nil
}

// awaitDurable confirms the claim just made (or found as the caller's
// own) on conn as Config.Wait asks. WAIT and WAITAOF count the writes of
// the connection they run on up to its last command, and Redis sets that
// mark on every command, reads included: after a SET NX GET that found
// the caller's own record, WAIT covers that record's write too, whichever
// connection made it.
func (s *Store) awaitDurable(ctx context.Context, conn *redis.Conn) error {
	w := s.wait
	if w.Replicas == AllReplicas {
		if err := awaitAllReplicas(ctx, conn, w); err != nil {
			return err
		}
	}
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

// awaitAllReplicas waits until every replica that the claim's primary
// counts as connected (ROLE, asked on conn just before) and at least
// w.MinReplicas acknowledged the connection's writes. A replica that
// connects during the wait is not waited for: it is receiving the
// claim as part of its synchronisation. One that disconnects during the
// wait makes it time out: closed, not open.
func awaitAllReplicas(ctx context.Context, conn *redis.Conn, w *WaitConfig) error {
	online, err := onlineReplicas(ctx, conn)
	if err != nil {
		return err
	}
	want := max(online, w.MinReplicas)
	n, err := conn.Wait(ctx, want, w.Timeout).Result()
	if err != nil {
		return err
	}
	if n < int64(want) {
		return fmt.Errorf("%w: WAIT %d (every connected replica: %d; min_replicas %d) acknowledged by %d within %s",
			ErrNotDurable, want, online, w.MinReplicas, n, w.Timeout)
	}
	return nil
}

// doer sends one command: a client or a connection.
type doer interface {
	Do(ctx context.Context, args ...interface{}) *redis.Cmd
}

// onlineReplicas returns how many replicas the primary on c counts as
// connected, as ROLE lists them (state online: the ones WAIT counts).
func onlineReplicas(ctx context.Context, c doer) (int, error) {
	cmd := c.Do(ctx, "role")
	return roleReplicas(cmd.Val(), cmd.Err())
}

// roleReplicas reads ROLE's reply v (or its error): the number of online
// replicas of a primary.
func roleReplicas(reply interface{}, err error) (int, error) {
	if err != nil {
		return 0, fmt.Errorf("ROLE: %w", err)
	}
	v, ok := reply.([]interface{})
	if !ok || len(v) != 3 || v[0] != "master" {
		return 0, fmt.Errorf("ROLE: the claim's server is not a primary (%.40v)", v)
	}
	replicas, ok := v[2].([]interface{})
	if !ok {
		return 0, fmt.Errorf("ROLE: unexpected replica list %T", v[2])
	}
	return len(replicas), nil
}

// Finish implements [idem.Store.Finish]: one script that rewrites the
// value if the stored holder token (fence and attempt) is the caller's. A
// terminal outcome also sets the key's TTL to ExpiresAt plus
// Config.ExpiryGrace.
//
// Given the caller's claim (p.Claim), Finish sends the claim's exact value
// and the exact new value: when the stored value is the claim, the script
// compares once and writes, and the store builds the answer from the
// claim. Otherwise the script decodes what it needs and answers the value
// it leaves (or a status word).
func (s *Store) Finish(ctx context.Context, p idem.FinishParams) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if p.State != idem.StateSucceeded && p.State != idem.StateFailed && p.State != idem.StateUnknown {
		return nil, fmt.Errorf("redisstore: finish: state %q is not succeeded, failed or unknown", p.State)
	}
	fc := s.newFinishCall(&p)
	if rd, ok := s.client.(rawDoer); ok {
		if v, claim, done, err := fc.runRaw(ctx, s, rd); done {
			if err != nil {
				return nil, storeErr("finish", s.noteErr(err))
			}
			return finishRecord(&p, v, claim)
		}
	}
	res, err := s.finish.Run(ctx, s.client, []string{fc.rec, fc.ch}, []byte(fc.exp), []byte(fc.val), []byte(fc.pxat)).Result()
	if err != nil {
		return nil, storeErr("finish", wrongType(s.noteErr(err)))
	}
	switch v := res.(type) {
	case int64:
		if v == 1 {
			return finishRecord(&p, "", true)
		}
	case string:
		return finishRecord(&p, v, false)
	}
	return nil, storeErr("finish", fmt.Errorf("unexpected script reply %T %.20v", res, res))
}

// claimHint reports whether p.Claim is this attempt's in_progress claim,
// whose value Finish can send, for a terminal outcome.
func claimHint(p *idem.FinishParams) bool {
	c := &p.Claim
	return c.State == idem.StateInProgress && c.Fence == p.Fence && c.AttemptID == p.AttemptID &&
		c.Scope == p.Scope && c.Key == p.Key && p.State != idem.StateUnknown
}

// appendClaimRest appends the bytes of c's value that follow the empty
// result of an in_progress record: lease, created, mark, scope, key,
// fingerprint, intent (see appendClaimTail).
func appendClaimRest(b []byte, c *idem.Record) []byte {
	b = appendTime(b, c.LeaseUntil)
	b = append(b, ';')
	b = appendTime(b, c.CreatedAt)
	b = append(b, ';')
	b = appendLen(b, string(c.Mark))
	b = appendLen(b, c.Scope)
	b = appendLen(b, c.Key)
	b = append(b, c.Fingerprint[:]...)
	return append(b, c.Intent...)
}

// nilIfEmpty shares b, read-only, as the contract allows; empty reads as
// nil, as decodeRecord gives it.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// finishRecord is Finish's answer: with claim, the record built from the
// claim the script found stored; otherwise the decoded value (or the
// status word's error).
func finishRecord(p *idem.FinishParams, res string, claim bool) (*idem.Record, error) {
	if !claim {
		return recordFrom("finish", res)
	}
	c := &p.Claim
	return &idem.Record{
		Scope: p.Scope, Key: p.Key, Fingerprint: c.Fingerprint, State: p.State,
		Fence: p.Fence, AttemptID: p.AttemptID, Intent: nilIfEmpty(c.Intent), Result: nilIfEmpty(p.Result),
		CreatedAt: utcMicro(c.CreatedAt), LeaseUntil: utcMicro(c.LeaseUntil),
		CompletedAt: utcMicro(p.CompletedAt), ExpiresAt: utcMicro(p.ExpiresAt), Mark: c.Mark,
	}, nil
}

// argBytes passes a []byte to go-redis through a pointer, which an
// interface holds without an allocation of its own.
type argBytes []byte

// MarshalBinary implements encoding.BinaryMarshaler for go-redis's writer.
func (b *argBytes) MarshalBinary() ([]byte, error) { return *b, nil }

// finishInline is how many bytes of the finish script's arguments a finishCall
// holds itself: a first-time request's (the claim's value twice, once with
// the outcome over it: ~380 bytes with a 32-byte attempt id, a 60-byte
// result and no intent) need no allocation of their own.
const finishInline = 512

// finishCall holds one EVALSHA of the finish script: its arguments point into
// the same allocation, and so do their bytes when they fit.
type finishCall struct {
	args           [8]interface{}
	rec, ch        string
	exp, val, pxat argBytes
	buf            [finishInline]byte
}

// newFinishCall builds the finish script's arguments (see its doc): the
// expected value (the claim's, or empty), the new value, the TTL and the
// publish command.
func (s *Store) newFinishCall(p *idem.FinishParams) *finishCall {
	fc := &finishCall{}
	fc.rec, fc.ch = s.recChanKeys(p.Scope, p.Key)
	fc.exp, fc.val, fc.pxat = s.finishArgs(p, fc.buf[:0])
	fc.args = [8]interface{}{"evalsha", s.finishSHA, "2", &fc.rec, &fc.ch, &fc.exp, &fc.val, &fc.pxat}
	return fc
}

// finishArgs appends the finish script's expected value, new value and TTL to
// b (allocating when b is too small):
//
//	new      "I1" state token expires ";" completed ";" len ":" result [rest]
//	         "I1u" token ";" completed ";"                   (unknown)
//	expected "I1p" token ";;0:" rest                         (with a claim hint)
//
// rest is appendClaimRest of p.Claim, sent only with a hint, for which
// new is the whole new value.
func (s *Store) finishArgs(p *idem.FinishParams, b []byte) (exp, val, pxat []byte) {
	c := &p.Claim
	hint := claimHint(p)
	var ttl int64
	// need is the exact length of the three, so that b is allocated (or
	// not, when it has the room) once.
	tokLen := decLen(p.Fence) + strLen(p.AttemptID)
	need := 3 + tokLen + 2 + timeLen(p.CompletedAt)
	if p.State != idem.StateUnknown {
		need += timeLen(p.ExpiresAt) + decLen(int64(len(p.Result))) + 1 + len(p.Result)
		if !p.ExpiresAt.IsZero() {
			ttl = p.ExpiresAt.Add(s.grace).UnixMilli()
			need += decLen(ttl)
		}
		if hint {
			rest := timeLen(c.LeaseUntil) + timeLen(c.CreatedAt) + 2 + strLen(string(c.Mark)) +
				strLen(c.Scope) + strLen(c.Key) + len(c.Fingerprint) + len(c.Intent)
			need += 2*rest + 7 + tokLen
		}
	}
	if cap(b)-len(b) < need {
		b = make([]byte, 0, need)
	}
	b = append(b, layoutVersion...)
	b = append(b, statecode.Of(p.State))
	tok := len(b)
	b = strconv.AppendInt(b, p.Fence, 10)
	b = append(b, ':')
	b = appendLen(b, p.AttemptID)
	tokEnd := len(b)
	if p.State == idem.StateUnknown {
		b = append(b, ';')
		b = appendTime(b, p.CompletedAt)
		b = append(b, ';')
		return nil, b[:len(b):len(b)], nil
	}
	b = appendTime(b, p.ExpiresAt)
	b = append(b, ';')
	b = appendTime(b, p.CompletedAt)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(len(p.Result)), 10)
	b = append(b, ':')
	b = append(b, p.Result...)
	rest := len(b)
	if hint {
		b = appendClaimRest(b, c)
	}
	end := len(b)
	val = b[:end:end]
	if hint {
		b = append(b, layoutVersion...)
		b = append(b, statecode.InProgress)
		b = append(b, b[tok:tokEnd]...)
		b = append(b, ";;0:"...)
		b = append(b, b[rest:end]...)
		exp = b[end:len(b):len(b)]
	}
	if !p.ExpiresAt.IsZero() {
		n := len(b)
		b = strconv.AppendInt(b, ttl, 10)
		pxat = b[n:len(b):len(b)]
	}
	return exp, val, pxat
}

// runRaw sends the EVALSHA as DoRaw and reads the reply itself: 1 (the
// stored value was the claim), or a bulk string, the stored value or a
// status word. done is false when the reply is anything else, such as
// NOSCRIPT, a redirect or a script error (each raised before the script
// writes); the caller then runs the script through go-redis's Script.Run,
// whose handling loads the script, follows redirects and returns errors.
// Running the finish script twice is harmless: a repeated outcome answers the
// stored value. A transport error is returned as it is (go-redis already
// retried).
func (fc *finishCall) runRaw(ctx context.Context, s *Store, rd rawDoer) (v string, claim, done bool, err error) {
	raw, err := s.doRaw(ctx, rd, fc.args[:])
	if err != nil {
		return "", false, true, err
	}
	if string(raw) == ":1\r\n" {
		return "", true, true, nil
	}
	v, found, ok := parseBulk(raw)
	return v, false, ok && found, nil
}

// stateCodes are the state codes as script arguments.
var stateCodes = map[idem.State]string{
	idem.StateInProgress: string(rune(statecode.InProgress)), idem.StateSucceeded: string(rune(statecode.Succeeded)),
	idem.StateFailed: string(rune(statecode.Failed)), idem.StateUnknown: string(rune(statecode.Unknown)),
}

// Release implements [idem.Store.Release].
func (s *Store) Release(ctx context.Context, p idem.ReleaseParams) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.run(ctx, "release", releaseScript, p.Scope, p.Key,
		holderToken(p.Fence, p.AttemptID), s.pubArg)
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
		holderToken(p.Fence, p.AttemptID), encTime(p.LeaseUntil))
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
	from := stateCodes[idem.StateUnknown]
	if len(p.From) > 0 {
		from = ""
		for _, st := range p.From {
			if !st.Valid() {
				return nil, fmt.Errorf("redisstore: resolve: From holds invalid state %q", st)
			}
			from += stateCodes[st]
		}
	}
	release, to := "0", stateCodes[p.To]
	if p.Release {
		release, to = "1", ""
	}
	expires := p.ExpiresAt
	if p.To == idem.StateInProgress {
		expires = time.Time{}
	}
	res, err := s.run(ctx, "resolve", resolveScript, p.Scope, p.Key,
		strconv.FormatInt(p.Fence, 10), from, to, release,
		p.AttemptID, p.Result, encTime(p.Now), encTime(p.LeaseUntil), encTime(expires),
		s.pexpireAt(expires), s.pubArg)
	if err != nil {
		return nil, err
	}
	if res == "released" {
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

// Get implements [idem.Store.Get] with one GET.
func (s *Store) Get(ctx context.Context, scope, key string) (*idem.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	r, err := s.read(ctx, s.recKey(scope, key))
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return nil, storeErr("get", s.noteErr(err))
	}
	return r, err
}

// read GETs and decodes the record at rec; ErrNotFound when absent.
func (s *Store) read(ctx context.Context, rec string) (*idem.Record, error) {
	v, err := s.client.Get(ctx, rec).Result()
	if err == redis.Nil {
		return nil, idem.ErrNotFound
	}
	if err != nil {
		return nil, wrongType(err)
	}
	return decodeRecord(v)
}

// run runs a write script on the record's keys; its answer is a status
// word or a stored value.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, scope, key string, args ...interface{}) (string, error) {
	rec, ch := s.recChanKeys(scope, key)
	res, err := sc.Run(ctx, s.client, []string{rec, ch}, args...).Text()
	if err != nil {
		return "", storeErr(op, wrongType(s.noteErr(err)))
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

// setNXGet sends SET rec val NX GET, val the new claim's value, and
// returns the value stored before, found false when there was none (the
// SET wrote val).
//
// A successful claim answers nil, which go-redis's Cmd treats as an error
// (redis.Nil) and runs through its retry and bad-connection checks, about
// 20 allocations per claim. So the command goes as DoRaw, whose reply
// this reads itself. Any error reply (MOVED, ASK, READONLY, WRONGTYPE, …)
// means the SET did not run; it is then sent again through Do, whose
// handling follows redirects, retires bad connections and returns the
// error. A transport error is returned as it is (go-redis already retried).
func (s *Store) claimSetNXGet(ctx context.Context, c claimConn, rec string, p *idem.ClaimParams) (string, bool, error) {
	sc := &setNXGetCall{rec: rec}
	sc.val = appendNewClaimValue(sc.buf[:0], p)
	if rd, ok := c.(rawDoer); ok {
		sc.args = [5]interface{}{"set", &sc.rec, &sc.val, "nx", "get"}
		raw, err := s.doRaw(ctx, rd, sc.args[:])
		if err != nil {
			return "", false, err
		}
		if v, found, ok := parseBulk(raw); ok {
			return v, found, nil
		}
	}
	v, err := c.Do(ctx, "set", rec, []byte(sc.val), "nx", "get").Text()
	if err == redis.Nil {
		return "", false, nil
	}
	return v, err == nil, err
}

// claimInline is how many bytes of a claim's value a setNXGetCall holds
// itself: a value without intent (~140 bytes with a 32-byte attempt id)
// and with an intent of about 100 bytes needs no allocation of its own.
const claimInline = 256

// setNXGetCall holds one SET NX GET in one allocation (see finishCall).
type setNXGetCall struct {
	args [5]interface{}
	rec  string
	val  argBytes
	buf  [claimInline]byte
}

// parseBulk reads a RESP bulk-string or null reply (RESP2 or RESP3).
// ok is false for anything else, such as an error reply.
func parseBulk(raw []byte) (v string, found, ok bool) {
	if len(raw) < 3 {
		return "", false, false
	}
	switch raw[0] {
	case '_': // RESP3 null
		return "", false, true
	case '$':
		i := bytes.IndexByte(raw, '\n')
		if i < 2 || raw[i-1] != '\r' {
			return "", false, false
		}
		n, err := strconv.Atoi(string(raw[1 : i-1]))
		if err != nil {
			return "", false, false
		}
		if n < 0 { // RESP2 null
			return "", false, true
		}
		if len(raw) != i+1+n+2 {
			return "", false, false
		}
		return string(raw[i+1 : i+1+n]), true, true
	}
	return "", false, false
}

// statusErr maps a script's status word to the contract's errors.
func statusErr(op string, res string) error {
	switch res {
	case "ok", "released":
		return nil
	case "fenced":
		return fmt.Errorf("redisstore: %s: %w", op, idem.ErrFenced)
	case "notfound":
		return fmt.Errorf("redisstore: %s: %w", op, idem.ErrNotFound)
	default:
		return storeErr(op, fmt.Errorf("unexpected script status %.20q", res))
	}
}

// recordFrom decodes a script's answer: a stored value, or a status word.
func recordFrom(op string, res string) (*idem.Record, error) {
	if !strings.HasPrefix(res, layoutVersion) {
		if err := statusErr(op, res); err != nil {
			return nil, err
		}
		return nil, storeErr(op, fmt.Errorf("script answered %q without a record", res))
	}
	rec, err := decodeRecord(res)
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

// doRaw sends args as one command on rd and returns its raw reply. When
// rd is the store's client and the store pipelines (unless
// Config.Unpipelined), the command goes alone if no other is going alone
// (nothing else is waiting for a connection's answer through the store,
// most likely: it would gain nothing from a pipeline and pay the hand-off
// to the pipeliner's goroutine), and otherwise rides the AutoPipeliner:
// queued, written with the others queued while a batch is on the wire,
// and answered when its batch's replies are read. A caller whose context
// ends stops waiting. An AutoPipeliner closed by another of the client's
// users (redis.ErrClosed) leaves the command to go alone.
func (s *Store) doRaw(ctx context.Context, rd rawDoer, args []interface{}) ([]byte, error) {
	if s.ap == nil || !s.onClient(rd) {
		return rd.DoRaw(ctx, args...).Bytes()
	}
	if s.lone.CompareAndSwap(false, true) {
		defer s.lone.Store(false)
		return rd.DoRaw(ctx, args...).Bytes()
	}
	cmd := redis.NewRawCmd(ctx, args...)
	err := s.ap.Submit(ctx, cmd).WaitContext(ctx)
	if errors.Is(err, redis.ErrClosed) {
		return rd.DoRaw(ctx, args...).Bytes()
	}
	if err != nil {
		return nil, err
	}
	return cmd.Bytes()
}

// onClient reports whether rd is the store's client (not a pinned
// connection).
func (s *Store) onClient(rd rawDoer) bool {
	c, ok := rd.(*redis.Client)
	return ok && redis.UniversalClient(c) == s.client
}
