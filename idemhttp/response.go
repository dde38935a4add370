package idemhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// recordVersion is the version of the recorded response encoding.
const recordVersion = 1

// RecordedResponse is an HTTP response as kept in a record's Result. Its
// encoding is JSON (documented in docs/http.md):
//
//	{"v":1,"status":201,"header":{"Content-Type":["application/json"]},"body":"<base64>"}
//	{"v":1,"status":200,"header":{…},"too_large":true,"size":5242881}
//
// A response larger than the limit is never recorded truncated: TooLarge is
// set, Body is empty and Size says how much was sent.
type RecordedResponse struct {
	V        int         `json:"v"`
	Status   int         `json:"status"`
	Header   http.Header `json:"header,omitempty"`
	Body     []byte      `json:"body,omitempty"`
	TooLarge bool        `json:"too_large,omitempty"`
	// Size is the number of body bytes the handler wrote.
	Size int64 `json:"size,omitempty"`
}

// Encode returns the bytes stored as a record's Result.
func (r *RecordedResponse) Encode() ([]byte, error) {
	c := *r
	c.V = recordVersion
	return json.Marshal(&c)
}

// DecodeResponse decodes a record's Result as written by
// [RecordedResponse.Encode].
func DecodeResponse(b []byte) (*RecordedResponse, error) {
	var r RecordedResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("idemhttp: recorded response: %w", err)
	}
	if r.V != recordVersion {
		return nil, fmt.Errorf("idemhttp: recorded response: unsupported version %d", r.V)
	}
	if r.Status < 100 || r.Status > 999 {
		return nil, errors.New("idemhttp: recorded response: invalid status")
	}
	return &r, nil
}
