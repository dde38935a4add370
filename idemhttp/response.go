package idemhttp

import (
	"fmt"
	"net/http"
	"slices"
)

// RecordedResponse is an HTTP response as kept in a record's Result. Its
// encoding is a compact binary format, version 2, documented in
// docs/http.md; records written in the JSON format of version 1 still
// decode. A response larger than the limit is never recorded truncated:
// TooLarge is set, Body is empty and Size says how much was sent.
type RecordedResponse struct {
	// V is the format version the response was decoded from; Encode
	// ignores it and always writes the current version.
	V        int         `json:"v"`
	Status   int         `json:"status"`
	Header   http.Header `json:"header,omitempty"`
	Body     []byte      `json:"body,omitempty"`
	TooLarge bool        `json:"too_large,omitempty"`
	// Size is the number of body bytes the handler wrote. Only a TooLarge
	// response keeps it apart from the body; otherwise it is len(Body).
	Size int64 `json:"size,omitempty"`
}

// Encode returns the bytes stored as a record's Result.
func (r *RecordedResponse) Encode() ([]byte, error) {
	if r.Status < 100 || r.Status > 999 {
		return nil, fmt.Errorf("idemhttp: recorded response: invalid status %d", r.Status)
	}
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	b := appendPrelude(make([]byte, 0, 64+len(r.Body)), r.Status, r.Header, names)
	if r.TooLarge {
		return markTooLarge(b, r.Size), nil
	}
	return append(b, r.Body...), nil
}

// DecodeResponse decodes a record's Result as written by
// [RecordedResponse.Encode].
func DecodeResponse(b []byte) (*RecordedResponse, error) {
	v, err := parseRecord(b)
	if err != nil {
		return nil, err
	}
	rr := &RecordedResponse{V: recordVersion, Status: v.status, TooLarge: v.tooLarge, Size: v.size}
	if v.nHeaders > 0 {
		rr.Header = make(http.Header, v.nHeaders)
		v.eachHeader(nil, func(name string, vals []string) { rr.Header[name] = vals })
	}
	if len(v.body) > 0 {
		rr.Body = slices.Clone(v.body)
	}
	return rr, nil
}
