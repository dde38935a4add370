package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Fingerprint is the SHA-256 of a request's canonical form. The same key
// with another fingerprint is a client bug, reported as [ErrMismatch].
type Fingerprint [32]byte

// String returns the fingerprint as 64 lower-case hex digits.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// IsZero reports whether f is the zero fingerprint (no request hashed).
func (f Fingerprint) IsZero() bool { return f == Fingerprint{} }

// ParseFingerprint parses 64 hex digits as written by [Fingerprint.String].
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	if len(s) != 64 {
		return f, fmt.Errorf("idem: fingerprint must be 64 hex digits, got %d characters", len(s))
	}
	if _, err := hex.Decode(f[:], []byte(s)); err != nil {
		return f, fmt.Errorf("idem: fingerprint: %w", err)
	}
	return f, nil
}

// NewFingerprint hashes parts as a length-prefixed sequence, so that
// ("ab","c") and ("a","bc") differ. Use it for requests that are not JSON;
// for JSON bodies see [FingerprintRequest].
func NewFingerprint(parts ...[]byte) Fingerprint {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}
