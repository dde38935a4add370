package idemgrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// ScopeFunc returns the scope of a call's key: the authenticated principal
// (user, tenant, service identity). Uniqueness is on (scope, key), so one
// principal is never served another's recorded response. fullMethod is
// the call's "/package.Service/Method". An error refuses the call with
// Unauthenticated (reason SCOPE_MISSING).
//
// An authentication interceptor chained before idemgrpc's can put the
// principal in the context; a ScopeFunc then reads it from there.
type ScopeFunc func(ctx context.Context, fullMethod string) (string, error)

// GlobalScope puts every key in one namespace shared by all callers. A
// server opts in to it explicitly, by passing it as Config.Scope, when its
// callers are trusted to choose unique keys (for example a single internal
// client).
func GlobalScope(context.Context, string) (string, error) { return "", nil }

// ErrNoScope is returned by the ready-made ScopeFuncs when the call has no
// principal to scope its key by.
var ErrNoScope = errors.New("idemgrpc: no principal to scope the key by")

// AuthInfoScope scopes keys by the peer's transport credentials: f maps
// the connection's verified credentials.AuthInfo (TLS, ALTS, a custom
// handshake) to the principal. A call without a peer or AuthInfo is
// refused.
func AuthInfoScope(f func(credentials.AuthInfo) (string, error)) ScopeFunc {
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.AuthInfo == nil {
			return "", ErrNoScope
		}
		return f(p.AuthInfo)
	}
}

// TLSPeerScope scopes keys by the verified client certificate of a mutual
// TLS connection: the scope is "tls:" and the SHA-256, in hex, of the leaf
// certificate's raw subject. Certificates re-issued to the same subject
// keep the scope. A connection whose client certificate was not verified
// against the server's ClientCAs (credentials.NewTLS with ClientAuth
// tls.RequireAndVerifyClientCert, or VerifyClientCertIfGiven and a
// certificate given) is refused.
var TLSPeerScope ScopeFunc = AuthInfoScope(tlsSubject)

func tlsSubject(ai credentials.AuthInfo) (string, error) {
	ti, ok := ai.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return "", ErrNoScope
	}
	sum := sha256.Sum256(ti.State.VerifiedChains[0][0].RawSubject)
	return "tls:" + hex.EncodeToString(sum[:]), nil
}

// MetadataScope scopes keys by the value of one request metadata entry,
// stored as its SHA-256 in hex, never in clear. Use it only for metadata
// a trusted component sets — an authentication interceptor chained before
// idemgrpc's, or a gateway that strips the entry from what clients send —
// and that names the principal rather than a credential that changes when
// it is refreshed. A call without exactly one non-empty value is refused.
func MetadataScope(name string) ScopeFunc {
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		v := md.Get(name)
		if len(v) != 1 || v[0] == "" {
			return "", ErrNoScope
		}
		sum := sha256.Sum256([]byte(v[0]))
		return hex.EncodeToString(sum[:]), nil
	}
}
