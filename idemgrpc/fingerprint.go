package idemgrpc

import (
	"github.com/idemkit/idem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fingerprintTag is the domain tag of a gRPC call's fingerprint, so that
// no HTTP request ever has the same one.
var fingerprintTag = []byte("idem/grpc/proto/v1")

// Fingerprint is the fingerprint of a call to fullMethod with request
// msg: SHA-256 over the method name and the message's deterministic
// protobuf encoding (proto.MarshalOptions{Deterministic: true}).
//
// Deterministic binary encoding, not protojson: protojson's output is
// unstable on purpose (it inserts random whitespace so that nobody
// compares its bytes), and the binary form the server re-encodes from the
// decoded message is stable for one schema: fields in number order, map
// entries sorted by key, defaults omitted, so that two clients that encode
// the same request differently (field order, packed or not) get the same
// fingerprint. Unknown fields are kept as received, so a request carrying
// fields the server's schema does not know differs from one without them.
func Fingerprint(fullMethod string, msg proto.Message) (idem.Fingerprint, error) {
	b, err := deterministic.Marshal(msg)
	if err != nil {
		return idem.Fingerprint{}, err
	}
	return idem.NewFingerprint(fingerprintTag, []byte(fullMethod), b), nil
}

// unknownFields names the digest of a message's unknown fields.
const unknownFields = "(unknown)"

// fieldDigests returns the digests of msg's populated top-level fields,
// each over the field's deterministic encoding alone, in idem's one digest
// encoding ([idem.DigestsOf]). They only have to tell fields apart for a
// mismatch report; the fingerprint, SHA-256 over the whole request,
// decides whether a retry matches. They are stored and compared only
// keyed for the call's scope ([idem.DigestKey]).
func fieldDigests(msg proto.Message) idem.Digests {
	m := msg.ProtoReflect()
	values := map[string][]byte{}
	one := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		one.Set(fd, v)
		b, err := deterministic.Marshal(one.Interface())
		one.Clear(fd)
		if err == nil {
			values[string(fd.Name())] = b
		}
		return true
	})
	if u := m.GetUnknown(); len(u) > 0 {
		values[unknownFields] = u
	}
	return idem.DigestsOf(values, 0)
}

// mismatchFields names the top-level fields that differ between the
// request that first used the key (its digests, keyed for its scope, in
// rec's intent) and msg. Only names are returned, never values; none in
// the global scope, or for a record keyed with another secret.
func (s *server) mismatchFields(scope string, rec *idem.Record, msg proto.Message) []string {
	if rec == nil || scope == "" {
		return nil
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil || in == nil {
		return nil
	}
	return s.digests.Diff(in.Fields[idem.KeyedDigestsField], scope, fieldDigests(msg))
}
