package idem

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// Per-field digests are keyed per scope, so that they can never be compared
// across callers. idemhttp, idemgrpc and idemmcp store a request's
// [Digests] only in the keyed form a [DigestKey] makes of them, and name
// the fields that differ in a mismatch only from that form.

// KeyedDigestsField is the [Intent] field under which idemhttp, idemgrpc
// and idemmcp store a request's digests keyed for its scope
// ([DigestKey.Key]), so that a later request with the key and another
// body, message or arguments is told which members differ. The field is
// absent in the global scope.
const KeyedDigestsField = "body_hmac"

// MinDigestSecret is the shortest secret [NewDigestKey] accepts, in bytes.
const MinDigestSecret = 16

// ErrDigestSecretTooShort is returned (wrapped) by [NewDigestKey] for a
// secret shorter than [MinDigestSecret] bytes.
var ErrDigestSecretTooShort = errors.New("idem: digest secret too short")

// digestLabel separates the keying of digests from any other use of the
// secret. It is part of every stored MAC: a new keying gets a new label.
const digestLabel = "idem/digests/hmac/v1\x00"

// maxPooledMAC keeps one long digest list from pinning its memory in the
// pool (the list is bounded, so this only guards a misconfiguration).
const maxPooledMAC = 64 << 10

// DigestKey keys [Digests] per scope with a server secret. A record's
// digest of a member is HMAC-SHA256(secret, label || len(scope) || scope
// || "name=digest"), truncated to 64 bits: a MAC under a key that is the
// secret and the scope together, over the member's name and its unkeyed
// digest. Two scopes' digests of one request have nothing in common, and
// nobody without the secret (a reader of the store included) can test a
// guessed value against them. In the global scope (the empty scope), which
// every caller shares, nothing is keyed and no fields are named: there the
// list would let one caller learn another's request field by field.
//
// The stored form [DigestKey.Key] returns is the key's [DigestKey.ID], ':',
// and the entries in [Digests]' encoding with each digest replaced by its
// MAC (16 lower-case hex digits); the empty Digests keep the id and ':'
// alone. [DigestKey.Diff] compares a stored form with a request's digests.
//
// A DigestKey is safe for concurrent use; its HMACs and buffers are pooled.
// A nil *DigestKey keys nothing: Key returns "" and Diff nil.
type DigestKey struct {
	id   string
	macs sync.Pool // of *digestMAC
}

// digestMAC is an HMAC keyed with the secret and its buffers.
type digestMAC struct {
	h       hash.Hash
	in, out []byte
	sum     [sha256.Size]byte
}

// NewDigestKey returns a key for digests made from secret, which every
// process sharing a store should be given alike. An empty secret means 32
// random bytes: digests are then compared only within this process, and a
// mismatch names no fields for a record another process (or this one
// before a restart) made. A shorter secret than [MinDigestSecret] is
// refused with [ErrDigestSecretTooShort].
func NewDigestKey(secret []byte) (*DigestKey, error) {
	if n := len(secret); n > 0 && n < MinDigestSecret {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrDigestSecretTooShort, n, MinDigestSecret)
	}
	s := append([]byte(nil), secret...)
	if len(s) == 0 {
		s = make([]byte, 32)
		_, _ = rand.Read(s) // crypto/rand.Read never fails
	}
	h := hmac.New(sha256.New, s)
	h.Write([]byte(digestLabel + "key id"))
	k := &DigestKey{id: hex.EncodeToString(h.Sum(nil)[:8])}
	k.macs.New = func() any { return &digestMAC{h: hmac.New(sha256.New, s)} }
	return k, nil
}

// ID names the key's secret without revealing it: the first 8 bytes of
// HMAC-SHA256(secret, label || "key id"), as 16 lower-case hex digits. It
// opens every stored form, so that digests keyed with another secret are
// never compared.
func (k *DigestKey) ID() string {
	if k == nil {
		return ""
	}
	return k.id
}

// Key returns d keyed for scope in the stored form (see [DigestKey]), or ""
// in the global scope ("").
func (k *DigestKey) Key(scope string, d Digests) string {
	if k == nil || scope == "" {
		return ""
	}
	return keyDigests(k, scope, d, true)
}

// KeyBytes is [DigestKey.Key] for digests encoded in a byte slice (as
// [BodyHasher.Append] writes them), without copying them to a string.
func (k *DigestKey) KeyBytes(scope string, d []byte) string {
	if k == nil || scope == "" {
		return ""
	}
	return keyDigests(k, scope, d, true)
}

// Diff returns, sorted, the names of the members that differ between
// stored, a stored form made by [DigestKey.Key] for scope, and d, a later
// request's digests, as [Digests.Diff] names them. It returns nil in the
// global scope, when stored is not a stored form, or when it was keyed with
// another secret (its id is not k's): every member would seem to differ.
func (k *DigestKey) Diff(stored, scope string, d Digests) []string {
	if k == nil || scope == "" {
		return nil
	}
	id, entries, ok := strings.Cut(stored, ":")
	if !ok || id != k.id {
		return nil
	}
	return Digests(entries).Diff(Digests(keyDigests(k, scope, d, false)))
}

// keyDigests returns enc, encoded Digests, with each "name=digest" entry's
// digest replaced by its MAC for scope, after the key's id and ':' when
// withID. The MAC covers the name too, so equal values under two names
// differ.
func keyDigests[T ~string | ~[]byte](k *DigestKey, scope string, enc T, withID bool) string {
	d := k.macs.Get().(*digestMAC)
	defer k.macs.Put(d)
	out := d.out[:0]
	if withID {
		out = append(out, k.id...)
		out = append(out, ':')
	}
	start := len(out)
	for i := 0; i < len(enc); {
		end := i
		for end < len(enc) && enc[end] != '&' {
			end++
		}
		eq := i
		for eq < end && enc[eq] != '=' {
			eq++
		}
		in := append(d.in[:0], digestLabel...)
		in = binary.BigEndian.AppendUint32(in, uint32(len(scope)))
		in = append(in, scope...)
		in = append(in, enc[i:end]...)
		d.in = in
		d.h.Reset()
		d.h.Write(in)
		if len(out) > start {
			out = append(out, '&')
		}
		out = append(out, enc[i:eq]...)
		out = append(out, '=')
		out = hex.AppendEncode(out, d.h.Sum(d.sum[:0])[:8])
		i = end + 1
	}
	s := string(out)
	if cap(out) <= maxPooledMAC {
		d.out = out
	}
	if cap(d.in) > maxPooledMAC {
		d.in = nil
	}
	return s
}
