package idemgrpc

import (
	"bytes"
	"reflect"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

func TestAnswerRoundTrip(t *testing.T) {
	for _, a := range []*answer{
		{respType: "idem.test.v1.ChargeResponse", resp: []byte{10, 4, 'c', 'h', '_', '1'}},
		{respType: "idem.test.v1.ChargeResponse"}, // an empty response
		{status: &spb.Status{Code: int32(codes.NotFound), Message: "no such account"}},
		{tooLarge: 1 << 21, tooCode: codes.OK},
		{respType: "a.B", header: metadata.Pairs("x-a", "1", "x-a", "2"), trailer: metadata.Pairs("x-b-bin", "\x00\xff")},
		{respType: "google.protobuf.Empty", decided: true, decidedBody: []byte(`{"id":"ch_1"}`)},
		{status: &spb.Status{Code: int32(codes.FailedPrecondition), Message: "declined"}, decided: true},
	} {
		got, err := decodeAnswer(encodeAnswer(a))
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		if got.respType != a.respType || !bytes.Equal(got.resp, a.resp) || !proto.Equal(got.status, a.status) ||
			got.tooLarge != a.tooLarge || got.tooCode != a.tooCode || got.decided != a.decided || !bytes.Equal(got.decidedBody, a.decidedBody) ||
			!reflect.DeepEqual(got.header, a.header) || !reflect.DeepEqual(got.trailer, a.trailer) {
			t.Fatalf("round trip of %+v gave %+v", a, got)
		}
	}
}

func TestDecodeAnswerRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":            nil,
		"other version":    {2, 10, 0},
		"nothing":          {recordVersion},
		"truncated":        {recordVersion, 18, 5, 1},
		"bad status":       {recordVersion, 26, 2, 0xff, 0xff},
		"truncated varint": {recordVersion, 32, 0x80},
		"bad header entry": {recordVersion, 50, 2, 8, 1},
	} {
		if _, err := decodeAnswer(b); err == nil {
			t.Errorf("%s: decoded %x", name, b)
		}
	}
}

// FuzzDecodeAnswer: any bytes decode or are refused, never panic, and a
// decoded answer encodes back to something that decodes alike.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(encodeAnswer(&answer{respType: "a.B", resp: []byte{8, 1}}))
	f.Add(encodeAnswer(&answer{status: &spb.Status{Code: 5, Message: "x"}}))
	f.Add(encodeAnswer(&answer{tooLarge: 99, tooCode: codes.Internal}))
	f.Add(encodeAnswer(&answer{respType: "google.protobuf.Empty", decided: true, decidedBody: []byte("{}")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAnswer(b)
		if err != nil {
			return
		}
		if _, err := decodeAnswer(encodeAnswer(a)); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", a, err)
		}
	})
}
