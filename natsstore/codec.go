package natsstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/statecode"
)

// A record is one KV value in layout "N1":
//
//	"N1" state                     state: storekit/statecode's byte, as in
//	                               pgstore's column and redisstore's value
//	uvarint fence
//	str attempt
//	time created, lease, completed, expires
//	str result, str mark, str scope, str key
//	32 bytes fingerprint
//	intent                         the rest of the value
//
// str is a uvarint length and the bytes; time is a varint of Unix
// microseconds plus one, 0 for the zero time (so that a time before 1970
// still round-trips). The state codes are storekit/statecode's, shared with
// pgstore and redisstore; the framing is this store's own, since a KV
// value is bytes and needs none of redisstore's in-script searching.
const layoutVersion = "N1"

// errLayout is wrapped when a value is not in layout N1.
var errLayout = errors.New("natsstore: value is not a record in layout " + layoutVersion)

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	u := t.UnixMicro()
	if u >= 0 {
		u++ // 0 stands for the zero time
	}
	return binary.AppendVarint(b, u)
}

// encodeRecord encodes r.
func encodeRecord(r *idem.Record) []byte {
	n := len(layoutVersion) + 1 + 10 + 4*11 + 6*5 + len(r.AttemptID) + len(r.Result) + len(r.Mark) +
		len(r.Scope) + len(r.Key) + len(r.Fingerprint) + len(r.Intent)
	b := make([]byte, 0, n)
	b = append(b, layoutVersion...)
	b = append(b, statecode.Of(r.State))
	b = binary.AppendUvarint(b, uint64(r.Fence))
	b = appendStr(b, r.AttemptID)
	b = appendTime(b, r.CreatedAt)
	b = appendTime(b, r.LeaseUntil)
	b = appendTime(b, r.CompletedAt)
	b = appendTime(b, r.ExpiresAt)
	b = appendStr(b, string(r.Result))
	b = appendStr(b, string(r.Mark))
	b = appendStr(b, r.Scope)
	b = appendStr(b, r.Key)
	b = append(b, r.Fingerprint[:]...)
	return append(b, r.Intent...)
}

// decoder reads a value left to right; the first fault sticks.
type decoder struct {
	v   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("natsstore: corrupt record: bad %s", what)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	u, n := binary.Uvarint(d.v)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.v = d.v[n:]
	return u
}

func (d *decoder) str(what string) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.v)) {
		d.fail(what)
		return ""
	}
	s := string(d.v[:n])
	d.v = d.v[n:]
	return s
}

func (d *decoder) time(what string) time.Time {
	if d.err != nil {
		return time.Time{}
	}
	u, n := binary.Varint(d.v)
	if n <= 0 {
		d.fail(what)
		return time.Time{}
	}
	d.v = d.v[n:]
	switch {
	case u == 0:
		return time.Time{}
	case u > 0:
		u--
	}
	return time.UnixMicro(u).UTC()
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// decodeRecord decodes a stored value. The record does not share v's
// memory.
func decodeRecord(v []byte) (*idem.Record, error) {
	if len(v) < len(layoutVersion)+1 || string(v[:len(layoutVersion)]) != layoutVersion {
		return nil, fmt.Errorf("%w (starts %q)", errLayout, v[:min(len(v), 4)])
	}
	st, ok := statecode.State(v[len(layoutVersion)])
	if !ok {
		return nil, fmt.Errorf("natsstore: corrupt record: state code %q", v[len(layoutVersion)])
	}
	d := decoder{v: v[len(layoutVersion)+1:]}
	r := &idem.Record{State: st}
	fence := d.uvarint("fence")
	if fence > 1<<63-1 {
		d.fail("fence")
	}
	r.Fence = int64(fence)
	r.AttemptID = d.str("attempt")
	r.CreatedAt = d.time("created")
	r.LeaseUntil = d.time("lease")
	r.CompletedAt = d.time("completed")
	r.ExpiresAt = d.time("expires")
	result := d.str("result")
	r.Mark = idem.Mark(d.str("mark"))
	r.Scope = d.str("scope")
	r.Key = d.str("key")
	if d.err != nil {
		return nil, d.err
	}
	if len(d.v) < len(r.Fingerprint) {
		return nil, errors.New("natsstore: corrupt record: short fingerprint")
	}
	copy(r.Fingerprint[:], d.v)
	r.Intent = bytesOrNil(string(d.v[len(r.Fingerprint):]))
	r.Result = bytesOrNil(result)
	return r, nil
}
