package idemgrpc

import (
	"context"
	"errors"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"google.golang.org/grpc/metadata"
)

// MetadataKey is the request metadata that carries the idempotency key.
const MetadataKey = "idempotency-key"

// ReplayedTrailer is set to "true" in the trailer of a call answered from a
// record.
const ReplayedTrailer = "idempotent-replayed"

// ErrNoKey reports a call without idempotency-key metadata.
var ErrNoKey = errors.New("idemgrpc: no idempotency-key metadata")

// KeyFromMetadata returns the key carried by md, [ErrNoKey] when there is
// none, or an error matching [idem.ErrInvalidKey] when it is malformed or
// repeated. The value is read as the HTTP Idempotency-Key header is (see
// [idemhttp.ParseKeyHeader]): a structured-field string ("abc") or a bare
// token (abc) name the same key of 1 to 255 printable ASCII bytes.
func KeyFromMetadata(md metadata.MD) (idem.Key, error) {
	vs := md.Get(MetadataKey)
	switch len(vs) {
	case 0:
		return "", ErrNoKey
	case 1:
		return idemhttp.ParseKeyHeader(vs[0])
	default:
		return "", &idem.KeyError{Reason: "the idempotency-key metadata is repeated"}
	}
}

// keyFromIncoming is KeyFromMetadata on the call's incoming metadata.
func keyFromIncoming(ctx context.Context) (idem.Key, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", ErrNoKey
	}
	return KeyFromMetadata(md)
}
