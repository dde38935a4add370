package idemhttp

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// Origin is the [idem.Intent] Origin the middleware (and so idem proxy)
// writes with every claim: the record's result is a [RecordedResponse].
// Whoever decides such a record outside the request path — reconciliation,
// a recovery hook, `idem resolve` — must store a RecordedResponse too (see
// [ResolvedResponse]), or every retry would get record-unreadable.
const Origin = "http"

// MadeRecord reports whether rec was made by the middleware, so that its
// result must be a [RecordedResponse]: its intent names [Origin]. A record
// claimed before the intent carried an origin is recognised by what the
// middleware always wrote: a result that decodes as a recorded response, or
// an operation that starts with an HTTP method ("POST", "POST /orders/*").
func MadeRecord(rec *idem.Record) bool {
	if rec == nil {
		return false
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err == nil && in != nil {
		if in.Origin != "" {
			return in.Origin == Origin
		}
		method, _, _ := strings.Cut(in.Operation, " ")
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			return true
		}
	}
	if len(rec.Result) > 0 {
		_, err := DecodeResponse(rec.Result)
		return err == nil
	}
	return false
}

// ResolvedResponse encodes the response a decision taken outside the
// request path records on a record the middleware made: status, a JSON
// body (body is encoded with encoding/json; use a problem document's
// members for an error status) and Content-Type application/json, or
// application/problem+json for a status of 400 and above. Retries with the
// key replay it as they would the handler's own response.
func ResolvedResponse(status int, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ct := "application/json"
	if status >= 400 {
		ct = "application/problem+json"
	}
	rr := &RecordedResponse{Status: status, Header: http.Header{"Content-Type": {ct}}, Body: b, Size: int64(len(b))}
	return rr.Encode()
}
