package idemgrpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// testCA issues certificates for a mutual-TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{pool: x509.NewCertPool()}
	ca.key = newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idem test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.pool.AddCert(ca.cert)
	return ca
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// issue returns a certificate for cn: a server's for 127.0.0.1, or a
// client's.
func (ca *testCA) issue(t *testing.T, cn string, server bool) tls.Certificate {
	t.Helper()
	ca.n++
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.n + 1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Keys are scoped by the verified client certificate: alice and bob may
// use the same key, and each is answered from their own record.
func TestTLSPeerScope(t *testing.T) {
	ca := newTestCA(t)
	srvCreds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.issue(t, "127.0.0.1", true)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13})
	client := func(cn string) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.issue(t, cn, false)}, RootCAs: ca.pool, MinVersion: tls.VersionTLS13})
	}
	st := memstoreFor(t)
	svc := &payments{}
	cfg := idemgrpc.Config{Scope: idemgrpc.TLSPeerScope}
	alice := newEnv(t, st, svc, setup{cfg: cfg, tcp: true, srvOpts: []grpc.ServerOption{grpc.Creds(srvCreds)}, creds: client("alice")})
	bob := newEnv(t, st, svc, setup{cfg: cfg, tcp: true, srvOpts: []grpc.ServerOption{grpc.Creds(srvCreds)}, creds: client("bob")})
	a1, _, err := alice.charge(t, "k1", chargeReq)
	if err != nil {
		t.Fatal(err)
	}
	b1, rep, err := bob.charge(t, "k1", chargeReq)
	if err != nil || rep || b1.GetId() == a1.GetId() {
		t.Fatalf("bob: %v, replayed %v, %v; alice's answer was %v", err, rep, b1, a1)
	}
	a2, rep, err := alice.charge(t, "k1", chargeReq)
	if err != nil || !rep || a2.GetId() != a1.GetId() {
		t.Fatalf("alice again: %v, replayed %v, %v; want her replay %v", err, rep, a2, a1)
	}
}

func TestTLSPeerScopeRefusesUnverifiedPeer(t *testing.T) {
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: idemgrpc.TLSPeerScope}})
	_, err := e.client.Charge(idemgrpc.WithKey(context.Background(), "k1"), &testpb.ChargeRequest{})
	if status.Code(err) != codes.Unauthenticated || idemgrpc.Reason(err) != idemgrpc.ReasonScopeMissing {
		t.Fatalf("plaintext peer: %v, want Unauthenticated %s", err, idemgrpc.ReasonScopeMissing)
	}
}

// A client certificate the server did not verify (tls.RequireAnyClientCert)
// names nobody: anyone can present one with any subject.
func TestTLSPeerScopeRefusesUnverifiedCertificate(t *testing.T) {
	ca, rogue := newTestCA(t), newTestCA(t)
	srvCreds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.issue(t, "127.0.0.1", true)},
		ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13})
	clientCreds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{rogue.issue(t, "alice", false)},
		RootCAs: ca.pool, MinVersion: tls.VersionTLS13})
	e := newEnv(t, memstoreFor(t), &payments{}, setup{cfg: idemgrpc.Config{Scope: idemgrpc.TLSPeerScope},
		tcp: true, srvOpts: []grpc.ServerOption{grpc.Creds(srvCreds)}, creds: clientCreds})
	_, _, err := e.charge(t, "k1", chargeReq)
	if status.Code(err) != codes.Unauthenticated || idemgrpc.Reason(err) != idemgrpc.ReasonScopeMissing {
		t.Fatalf("unverified certificate: %v, want Unauthenticated %s", err, idemgrpc.ReasonScopeMissing)
	}
}
