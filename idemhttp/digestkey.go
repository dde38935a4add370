package idemhttp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sync"
)

// Per-field digests are keyed per scope, so that they can never be
// compared across callers: a record's digest of a member is
// HMAC-SHA256(Config.DigestSecret, digestLabel || len(scope) || scope ||
// "name=xxh64"), truncated to 64 bits — a MAC under a key that is the
// secret and the scope together. Two scopes' digests of one body have
// nothing in common, and nobody without the secret (a reader of the store
// included) can test a guessed value against them. In the global scope,
// which every caller shares, no digests are recorded at all and a 422
// names no fields: there, the list would let one caller learn another's
// body field by field.
//
// The transformation applies to the encoded [idem.Digests] the body's
// fingerprint comes with ([idem.BodyHasher]), when they are stored
// (intentFields) and when they are compared (mismatchFields).

// keyedDigestsField holds the keyed digests in a record's Intent.Fields:
// the id of the secret they were keyed with (digestKeyID), ':', and the
// entries in [idem.Digests]'s encoding, each digest the MAC. Digests keyed with another
// secret (another process's random one) are not compared.
const keyedDigestsField = "body_hmac"

// digestLabel separates the scope key's derivation from any other use of
// the secret.
const digestLabel = "idemhttp field digests v1\x00"

// MinDigestSecret is the shortest Config.DigestSecret accepted, in bytes.
const MinDigestSecret = 16

// digestSecret returns the secret to key digests with: s, or 32 random
// bytes when s is empty.
func digestSecret(s []byte) []byte {
	if len(s) > 0 {
		return append([]byte(nil), s...)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// digestKeyID names a secret without revealing it: the first 8 bytes of
// HMAC-SHA256(secret, digestLabel || "key id"), in hex.
func digestKeyID(secret []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(digestLabel + "key id"))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// maxPooledMAC keeps one long digest list from pinning its memory in the
// pool (the list is bounded, so this only guards a misconfiguration).
const maxPooledMAC = 64 << 10

// digestMAC is an HMAC keyed with the digest secret and its buffers,
// pooled per middleware.
type digestMAC struct {
	h       hash.Hash
	in, out []byte
	sum     [sha256.Size]byte
}

func newDigestMACs(secret []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return &digestMAC{h: hmac.New(sha256.New, secret)} }}
}

// keyDigests returns enc, encoded [idem.Digests], with each
// "name=digest" pair's digest replaced by its MAC for scope, after the
// secret's id and ':'. The MAC covers the name too, so equal values under
// two names differ.
func (m *Middleware) keyDigests(scope string, enc []byte) string {
	if len(enc) == 0 {
		return ""
	}
	d := m.macs.Get().(*digestMAC)
	defer m.macs.Put(d)
	out := append(d.out[:0], m.digestKeyID...)
	out = append(out, ':')
	for rest := enc; len(rest) > 0; {
		pair, next, _ := bytes.Cut(rest, []byte("&"))
		rest = next
		name, _, _ := bytes.Cut(pair, []byte("="))
		in := append(d.in[:0], digestLabel...)
		in = binary.BigEndian.AppendUint32(in, uint32(len(scope)))
		in = append(in, scope...)
		in = append(in, pair...)
		d.in = in
		d.h.Reset()
		d.h.Write(in)
		if out[len(out)-1] != ':' {
			out = append(out, '&')
		}
		out = append(out, name...)
		out = append(out, '=')
		out = hex.AppendEncode(out, d.h.Sum(d.sum[:0])[:8])
	}
	if cap(out) <= maxPooledMAC {
		d.out = out
	}
	if cap(d.in) > maxPooledMAC {
		d.in = nil
	}
	return string(out)
}

// intentFields returns the intent fields holding in's body digests keyed
// for scope: none in the global scope or when the body is not a JSON
// object.
func (m *Middleware) intentFields(scope string, in *input) map[string]string {
	if scope == "" || in.digests == nil || len(*in.digests) == 0 {
		return nil
	}
	return map[string]string{keyedDigestsField: m.keyDigests(scope, *in.digests)}
}
