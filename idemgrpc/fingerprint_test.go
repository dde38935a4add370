package idemgrpc_test

import (
	"testing"

	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemgrpc/internal/testpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Two encodings of one request — fields in another order, map entries in
// another order — decode to one message and so fingerprint alike.
func TestFingerprintIgnoresClientEncoding(t *testing.T) {
	var a, b []byte
	entry := func(k, v string) []byte {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		return protowire.AppendString(e, v)
	}
	a = protowire.AppendTag(a, 1, protowire.BytesType)
	a = protowire.AppendString(a, "acct_1")
	a = protowire.AppendTag(a, 2, protowire.VarintType)
	a = protowire.AppendVarint(a, 1000)
	a = protowire.AppendTag(a, 4, protowire.BytesType)
	a = protowire.AppendBytes(a, entry("x", "1"))
	a = protowire.AppendTag(a, 4, protowire.BytesType)
	a = protowire.AppendBytes(a, entry("y", "2"))

	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, entry("y", "2"))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1000)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, entry("x", "1"))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "acct_1")

	var ma, mb testpb.ChargeRequest
	if err := proto.Unmarshal(a, &ma); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, &mb); err != nil {
		t.Fatal(err)
	}
	fa, err := idemgrpc.Fingerprint(chargeMethod, &ma)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := idemgrpc.Fingerprint(chargeMethod, &mb)
	if err != nil {
		t.Fatal(err)
	}
	if fa != fb {
		t.Fatal("one request encoded two ways fingerprints differently")
	}
	mb.Amount++
	if fc, _ := idemgrpc.Fingerprint(chargeMethod, &mb); fc == fa {
		t.Fatal("another amount fingerprints alike")
	}
	if fd, _ := idemgrpc.Fingerprint("/idem.test.v1.Payments/Refund", &ma); fd == fa {
		t.Fatal("another method fingerprints alike")
	}
}
