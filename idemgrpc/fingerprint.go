package idemgrpc

import (
	"encoding/binary"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
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

// digestsField holds the per-field request digests in the record's
// Intent.Fields, as one entry: "name=digest" pairs joined by '&' in name
// order, names query-escaped (field names need no escaping; the pseudo
// field of unknown fields does).
const digestsField = "request_xxh64"

// unknownFields names the digest of a message's unknown fields.
const unknownFields = "(unknown)"

// fieldDigests returns the encoded digests of msg's populated top-level
// fields: each field's deterministic encoding alone, hashed with XXH64 as
// 16 hex digits. They only have to tell fields apart for a mismatch
// report; the fingerprint, SHA-256 over the whole request, decides whether
// a retry matches.
func fieldDigests(msg proto.Message) string {
	m := msg.ProtoReflect()
	d := map[string]string{}
	one := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		one.Set(fd, v)
		b, err := deterministic.Marshal(one.Interface())
		one.Clear(fd)
		if err == nil {
			d[string(fd.Name())] = digest(b)
		}
		return true
	})
	if u := m.GetUnknown(); len(u) > 0 {
		d[unknownFields] = digest(u)
	}
	return encodeDigests(d)
}

func digest(b []byte) string {
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], xxhash.Sum64(b))
	return hex.EncodeToString(sum[:])
}

func encodeDigests(d map[string]string) string {
	names := make([]string, 0, len(d))
	for k := range d {
		names = append(names, k)
	}
	slices.Sort(names)
	var sb strings.Builder
	for i, k := range names {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(url.QueryEscape(k))
		sb.WriteByte('=')
		sb.WriteString(d[k])
	}
	return sb.String()
}

// decodeDigests reads what encodeDigests wrote.
func decodeDigests(s string) map[string]string {
	d := map[string]string{}
	q, err := url.ParseQuery(s)
	if err != nil {
		return d
	}
	for k, vs := range q {
		if len(vs) > 0 {
			d[k] = vs[0]
		}
	}
	return d
}

// mismatchFields names the top-level fields that differ between the
// request that first used the key (its digests, in rec's intent) and msg.
// Only names are returned, never values.
func mismatchFields(rec *idem.Record, msg proto.Message) []string {
	if rec == nil {
		return nil
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil || in == nil {
		return nil
	}
	stored, ok := in.Fields[digestsField]
	if !ok {
		return nil
	}
	return idem.DiffDigests(decodeDigests(stored), decodeDigests(fieldDigests(msg)))
}
