// Package bodytag holds the domain tags under which a request body is
// fingerprinted: the root package's FingerprintRequest hashes under them,
// and so does idemhttp, which canonicalises a JSON body once for both its
// fingerprint and its member digests. Fingerprints are stored, so a tag
// never changes; a new hashing gets a new tag.
package bodytag

const (
	// JSON is the tag of a JSON body, hashed in canonical form.
	JSON = "idem/body/json/v1"
	// Raw is the tag of any other body, hashed as bytes.
	Raw = "idem/body/raw/v1"
)
