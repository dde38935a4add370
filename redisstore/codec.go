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

// recordStrings lists every hash field of a record in the order the
// scripts and the read-first path fetch them with HMGET, so a record comes
// back as a positional array: no field names on the wire and no map to
// build when decoding. The scripts spell the same order out as
// "s k fp st f a in r m c l d x" (see scripts.go).
var recordStrings = []string{fScope, fKey, fFingerprint, fState, fFence, fAttempt,
	fIntent, fResult, fMark, fCreated, fLease, fCompleted, fExpires}

// Positions in recordStrings.
const (
	iScope = iota
	iKey
	iFingerprint
	iState
	iFence
	iAttempt
	iIntent
	iResult
	iMark
	iCreated
	iLease
	iCompleted
	iExpires
	nFields
)

// decodeValues turns a positional HMGET reply (values in recordStrings
// order; an absent field is nil, or false when a script relays it over
// RESP3) into a record; a missing state means no record. It reads the
// values in place: no intermediate map.
func decodeValues(vals []interface{}) (*idem.Record, error) {
	if len(vals) != nFields {
		return nil, corrupt(fmt.Errorf("%d values, want %d", len(vals), nFields))
	}
	str := func(i int) string { s, _ := vals[i].(string); return s }
	if _, ok := vals[iState].(string); !ok {
		return nil, idem.ErrNotFound
	}
	return decodeWith(str)
}

func decodeMap(m map[string]string) (*idem.Record, error) {
	if len(m) == 0 {
		return nil, idem.ErrNotFound
	}
	return decodeWith(func(i int) string { return m[recordStrings[i]] })
}

// decodeWith builds a record from the field values str returns by position.
func decodeWith(str func(int) string) (*idem.Record, error) {
	r := &idem.Record{
		Scope:     str(iScope),
		Key:       str(iKey),
		AttemptID: str(iAttempt),
		Mark:      idem.Mark(str(iMark)),
	}
	var err error
	if r.State, err = idem.ParseState(str(iState)); err != nil {
		return nil, corrupt(err)
	}
	if r.Fence, err = strconv.ParseInt(str(iFence), 10, 64); err != nil {
		return nil, corrupt(err)
	}
	if fp := str(iFingerprint); fp != "" {
		if r.Fingerprint, err = idem.ParseFingerprint(fp); err != nil {
			return nil, corrupt(err)
		}
	}
	if v := str(iIntent); v != "" {
		r.Intent = []byte(v)
	}
	if v := str(iResult); v != "" {
		r.Result = []byte(v)
	}
	for _, tf := range [...]struct {
		dst *time.Time
		i   int
	}{{&r.CreatedAt, iCreated}, {&r.LeaseUntil, iLease}, {&r.CompletedAt, iCompleted}, {&r.ExpiresAt, iExpires}} {
		if *tf.dst, err = decTime(str(tf.i)); err != nil {
			return nil, corrupt(fmt.Errorf("field %s: %w", recordStrings[tf.i], err))
		}
	}
	return r, nil
}

func corrupt(err error) error {
	return fmt.Errorf("redisstore: corrupt record: %w", err)
}
