package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// A record is one Redis string in layout "I1" (see the package doc):
//
//	"I1" state fence ":" len ":" attempt          header; the holder token is
//	                                              fence ":" len ":" attempt
//	expires ";" completed ";"                     written by Finish
//	len ":" result                                written by Finish
//	lease ";" created ";"                         written by Claim, Heartbeat, Resolve
//	len ":" mark                                  written by SetMark
//	len ":" scope len ":" key fingerprint intent  written by Claim only
//
// state is one byte (p in_progress, s succeeded, f failed, u unknown);
// times are Unix microseconds in decimal, empty for the zero time; every
// variable-length string but the last (intent) is prefixed by its length in
// bytes; the fingerprint is 32 raw bytes. An in_progress record's lease may
// carry one leading '0' (markAwaitedScript): it reads as the same time, and
// tells the finish script that a subscriber waits for this record. The order puts what Finish
// rewrites right after the header, so its script finds the end of the
// result with three searches and keeps the rest of the value as one slice.
const layoutVersion = "I1"

// errOldLayout is wrapped when a record key holds a value this version does
// not read: a hash (the layout before "I1") or another layout version.
var errOldLayout = errors.New("record is not in layout " + layoutVersion + " (written by another version of redisstore); delete it or migrate it")

// wrongType turns Redis's WRONGTYPE reply (a record key holding a hash of
// the layout before "I1") into a clear error, and passes others through.
func wrongType(err error) error {
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("redisstore: %w: %v", errOldLayout, err)
	}
	return err
}

func encTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	return strconv.AppendInt(b, t.UnixMicro(), 10)
}

func appendLen(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// decLen is the length of n in decimal.
func decLen(n int64) int {
	l, u := 1, uint64(n)
	if n < 0 {
		l, u = 2, -u
	}
	for ; u >= 10; u /= 10 {
		l++
	}
	return l
}

// timeLen is the length of appendTime's encoding of t.
func timeLen(t time.Time) int {
	if t.IsZero() {
		return 0
	}
	return decLen(t.UnixMicro())
}

// strLen is the length of appendLen's encoding of s.
func strLen(s string) int { return decLen(int64(len(s))) + 1 + len(s) }

// holderToken is fence ":" len ":" attempt, the part of the header that
// names the attempt holding the record. It is self-delimiting, so a stored
// value starts (after version and state) with the token exactly when its
// fence and attempt id are these.
func holderToken(fence int64, attempt string) string {
	b := make([]byte, 0, 24+len(attempt))
	b = strconv.AppendInt(b, fence, 10)
	b = append(b, ':')
	return string(appendLen(b, attempt))
}

// claimValue encodes the in_progress record a claim writes, split around
// its fence: pre + fence + post is the value. The claim script inserts the
// fence it decided.
func claimValue(p *idem.ClaimParams) (pre string, post []byte) {
	return layoutVersion + string(rune(statecode.InProgress)), appendClaimTail(nil, p)
}

// newClaimValue is the whole value of a first claim (fence 1), as SET NX
// GET writes it.
func newClaimValue(p *idem.ClaimParams) []byte { return appendNewClaimValue(nil, p) }

// appendNewClaimValue appends newClaimValue to b, or to a new buffer of
// its exact length when b has not the room (never growing one: that
// would cost a second allocation and a copy).
func appendNewClaimValue(b []byte, p *idem.ClaimParams) []byte {
	if n := newClaimLen(p); cap(b)-len(b) < n {
		b = make([]byte, 0, n)
	}
	b = append(b, layoutVersion...)
	b = append(b, statecode.InProgress, '1')
	return appendClaimTail(b, p)
}

// newClaimLen is the length of newClaimValue(p).
func newClaimLen(p *idem.ClaimParams) int {
	// "I1p1:" len ":" attempt ";;0:" lease ";" created ";0:" scope key fp intent
	return 5 + strLen(p.AttemptID) + 4 + timeLen(p.LeaseUntil) + 1 + timeLen(p.Now) + 3 +
		strLen(p.Scope) + strLen(p.Key) + len(p.Fingerprint) + len(p.Intent)
}

// appendClaimTail appends what follows the fence in a new claim's value.
func appendClaimTail(b []byte, p *idem.ClaimParams) []byte {
	b = append(b, ':')
	b = appendLen(b, p.AttemptID)
	b = append(b, ";;0:"...) // no expires, no completed, empty result
	b = appendTime(b, p.LeaseUntil)
	b = append(b, ';')
	b = appendTime(b, p.Now)
	b = append(b, ";0:"...) // empty mark
	b = appendLen(b, p.Scope)
	b = appendLen(b, p.Key)
	b = append(b, p.Fingerprint[:]...)
	return append(b, p.Intent...)
}

// decoder reads a value left to right.
type decoder struct {
	v   string
	i   int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = corrupt(fmt.Errorf("bad %s at byte %d", what, d.i))
	}
}

// num reads a decimal up to sep and steps past it, in one pass (no search
// then parse); a leading '-' only when signed. An empty number reads as 0
// with empty true.
func (d *decoder) num(sep byte, what string, signed bool) (n int64, empty bool) {
	if d.err != nil {
		return 0, false
	}
	i, neg := d.i, false
	if signed && i < len(d.v) && d.v[i] == '-' {
		i, neg = i+1, true
	}
	start := i
	for ; i < len(d.v); i++ {
		c := d.v[i]
		if c == sep {
			if neg {
				if i == start {
					break
				}
				n = -n
			}
			empty = i == d.i
			d.i = i + 1
			return n, empty
		}
		if c < '0' || c > '9' || n > (1<<63-1-9)/10 {
			break
		}
		n = n*10 + int64(c-'0')
	}
	d.fail(what)
	return 0, false
}

func (d *decoder) int(sep byte, what string) int64 {
	n, empty := d.num(sep, what, false)
	if empty {
		d.fail(what)
	}
	return n
}

// time reads Unix microseconds up to ';'; empty is the zero time.
func (d *decoder) time(what string) time.Time {
	n, empty := d.num(';', what, true)
	if d.err != nil || empty {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}

// str reads a length-prefixed string. A bad length is reported as a bad
// what (no " length" suffix is built: that would cost an allocation on
// every read, corrupt or not).
func (d *decoder) str(what string) string {
	n := d.int(':', what)
	if d.err != nil {
		return ""
	}
	if n > int64(len(d.v)-d.i) {
		d.fail(what)
		return ""
	}
	s := d.v[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// decodeRecord decodes a stored value. The record's strings share v's
// memory; Intent and Result are copies.
func decodeRecord(v string) (*idem.Record, error) {
	if !strings.HasPrefix(v, layoutVersion) || len(v) < len(layoutVersion)+1 {
		return nil, fmt.Errorf("redisstore: %w: value starts %q", errOldLayout, v[:min(len(v), 4)])
	}
	st, ok := statecode.State(v[len(layoutVersion)])
	if !ok {
		return nil, corrupt(fmt.Errorf("state code %q", v[len(layoutVersion)]))
	}
	d := decoder{v: v, i: len(layoutVersion) + 1}
	r := &idem.Record{State: st}
	r.Fence = d.int(':', "fence")
	r.AttemptID = d.str("attempt")
	r.ExpiresAt = d.time("expires")
	r.CompletedAt = d.time("completed")
	result := d.str("result")
	r.LeaseUntil = d.time("lease")
	r.CreatedAt = d.time("created")
	r.Mark = idem.Mark(d.str("mark"))
	r.Scope = d.str("scope")
	r.Key = d.str("key")
	if d.err != nil {
		return nil, d.err
	}
	if len(v)-d.i < len(r.Fingerprint) {
		return nil, corrupt(errors.New("short fingerprint"))
	}
	copy(r.Fingerprint[:], v[d.i:])
	r.Intent = bytesOrNil(v[d.i+len(r.Fingerprint):])
	r.Result = bytesOrNil(result)
	return r, nil
}

func corrupt(err error) error {
	return fmt.Errorf("redisstore: corrupt record: %w", err)
}
