package idemhttp

import "github.com/idemkit/idem"

// Per-field digests are keyed per scope with an [idem.DigestKey] made from
// Config.DigestSecret, so that they can never be compared across callers
// (see its docs for the MAC and the stored form). In the global scope,
// which every caller shares, no digests are recorded at all and a 422
// names no fields.
//
// The keying applies to the encoded [idem.Digests] the body's fingerprint
// comes with ([idem.BodyHasher]), when they are stored (intentFields) and
// when they are compared (mismatchFields).

// keyedDigestsField holds the keyed digests in a record's Intent.Fields.
const keyedDigestsField = idem.KeyedDigestsField

// MinDigestSecret is the shortest Config.DigestSecret accepted, in bytes.
const MinDigestSecret = idem.MinDigestSecret

// intentFields returns the intent fields holding in's body digests keyed
// for scope: none in the global scope or when the body is not a JSON
// object.
func (m *Middleware) intentFields(scope string, in *input) map[string]string {
	if scope == "" || in.digests == nil || len(*in.digests) == 0 {
		return nil
	}
	return map[string]string{keyedDigestsField: m.digests.KeyBytes(scope, *in.digests)}
}
