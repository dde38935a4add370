package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idem"
)

// Hash fields of a record. Times are Unix microseconds in decimal; the empty
// string is the zero time. The scripts compare them numerically.
const (
	fScope       = "s"
	fKey         = "k"
	fFingerprint = "fp"
	fState       = "st"
	fFence       = "f"
	fAttempt     = "a"
	fIntent      = "in"
	fResult      = "r"
	fMark        = "m"
	fCreated     = "c"
	fLease       = "l"
	fCompleted   = "d"
	fExpires     = "x"
)

func encTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func decTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(n).UTC(), nil
}

// decodeFields turns a flat HGETALL reply (field, value, …) into a record.
func decodeFields(flat []interface{}) (*idem.Record, error) {
	if len(flat) == 0 {
		return nil, idem.ErrNotFound
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return decodeMap(m)
}

func decodeMap(m map[string]string) (*idem.Record, error) {
	if len(m) == 0 {
		return nil, idem.ErrNotFound
	}
	r := &idem.Record{
		Scope:     m[fScope],
		Key:       m[fKey],
		AttemptID: m[fAttempt],
		Mark:      idem.Mark(m[fMark]),
	}
	var err error
	if r.State, err = idem.ParseState(m[fState]); err != nil {
		return nil, corrupt(err)
	}
	if r.Fence, err = strconv.ParseInt(m[fFence], 10, 64); err != nil {
		return nil, corrupt(err)
	}
	if fp := m[fFingerprint]; fp != "" {
		if r.Fingerprint, err = idem.ParseFingerprint(fp); err != nil {
			return nil, corrupt(err)
		}
	}
	if v := m[fIntent]; v != "" {
		r.Intent = []byte(v)
	}
	if v := m[fResult]; v != "" {
		r.Result = []byte(v)
	}
	for _, tf := range []struct {
		dst   *time.Time
		field string
	}{{&r.CreatedAt, fCreated}, {&r.LeaseUntil, fLease}, {&r.CompletedAt, fCompleted}, {&r.ExpiresAt, fExpires}} {
		if *tf.dst, err = decTime(m[tf.field]); err != nil {
			return nil, corrupt(fmt.Errorf("field %s: %w", tf.field, err))
		}
	}
	return r, nil
}

func corrupt(err error) error {
	return fmt.Errorf("redisstore: corrupt record: %w", err)
}
