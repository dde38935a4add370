// Package statecode is the one-byte code a store keeps for a record's
// state where space counts: pgstore's state column (a "char", migration
// 0003) and the header of redisstore's packed value. The codes are part of
// both stores' persistent formats and must never change.
package statecode

import "github.com/idemkit/idem"

// The codes.
const (
	InProgress byte = 'p'
	Succeeded  byte = 's'
	Failed     byte = 'f'
	Unknown    byte = 'u'
)

// Of is st's code, or 0 for a value that is no state.
func Of(st idem.State) byte {
	switch st {
	case idem.StateInProgress:
		return InProgress
	case idem.StateSucceeded:
		return Succeeded
	case idem.StateFailed:
		return Failed
	case idem.StateUnknown:
		return Unknown
	}
	return 0
}

// State is the state c stands for; false if c is no code.
func State(c byte) (idem.State, bool) {
	switch c {
	case InProgress:
		return idem.StateInProgress, true
	case Succeeded:
		return idem.StateSucceeded, true
	case Failed:
		return idem.StateFailed, true
	case Unknown:
		return idem.StateUnknown, true
	}
	return "", false
}
