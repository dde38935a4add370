package idemhttp_test

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemhttp"
)

func TestRecordedResponseRoundTrip(t *testing.T) {
	for _, rr := range []*idemhttp.RecordedResponse{
		{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Link": {"</a>", "</b>"}}, Body: []byte(`{"id":7}`), Size: 8},
		{Status: 204},
		{Status: 200, Header: http.Header{"Location": {"/big/1"}}, TooLarge: true, Size: 5 << 20},
		{Status: 200, Header: http.Header{"X-Empty": {}}, Body: []byte{0, '{', 0xff}, Size: 3},
	} {
		b, err := rr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := idemhttp.DecodeResponse(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", rr, err)
		}
		want := *rr
		want.V = 2
		if want.TooLarge {
			want.Body = nil
		}
		if len(want.Header) == 0 {
			want.Header = nil
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, &want)
		}
	}
}

func TestDecodeResponseRefuses(t *testing.T) {
	good, _ := (&idemhttp.RecordedResponse{Status: 200, Header: http.Header{"Etag": {"x"}}, TooLarge: true, Size: 9}).Encode()
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":           {nil, "truncated"},
		"future version":  {[]byte{0, 3, 0, 200, 1, 0}, "unsupported format version 3"},
		"not a record":    {[]byte("HTTP/1.1 200 OK"), "unrecognised encoding"},
		"unknown flag":    {[]byte{0, 2, 2, 200, 1, 0}, "unknown flags"},
		"status 99":       {[]byte{0, 2, 0, 99, 0}, "invalid status"},
		"header overflow": {[]byte{0, 2, 0, 200, 1, 9}, "truncated"},
		"trailing bytes":  {append(bytes.Clone(good), 0), "data after"},
		"cut size":        {good[:len(good)-1], "truncated"},
	} {
		if _, err := idemhttp.DecodeResponse(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

// FuzzDecodeResponse checks that the decoder never panics, and that what it
// accepts encodes back to a record that decodes to the same response.
func FuzzDecodeResponse(f *testing.F) {
	for _, rr := range []*idemhttp.RecordedResponse{
		{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":7}`)},
		{Status: 200, Header: http.Header{"Location": {"/x"}}, TooLarge: true, Size: 1 << 21},
	} {
		b, _ := rr.Encode()
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"status":200,"body":"eA=="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rr, err := idemhttp.DecodeResponse(b)
		if err != nil {
			return
		}
		if rr.Status < 100 || rr.Status > 999 || (rr.TooLarge && len(rr.Body) > 0) {
			t.Fatalf("accepted an invalid response: %+v", rr)
		}
		if rr.V == 1 && rr.TooLarge {
			rr.Body = nil // version 1 kept a body beside too_large; version 2 cannot
		}
		enc, err := rr.Encode()
		if err != nil {
			t.Fatalf("re-encode %+v: %v", rr, err)
		}
		again, err := idemhttp.DecodeResponse(enc)
		if err != nil {
			t.Fatalf("decode of re-encoded %+v: %v", rr, err)
		}
		if again.Status != rr.Status || again.TooLarge != rr.TooLarge || !bytes.Equal(again.Body, rr.Body) || len(again.Header) != len(rr.Header) {
			t.Fatalf("re-encoded response differs:\n got %+v\nwant %+v", again, rr)
		}
		if !rr.TooLarge && again.Size != int64(len(again.Body)) {
			t.Fatalf("size %d of a %d-byte body", again.Size, len(again.Body))
		}
	})
}
