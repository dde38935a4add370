package idemhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// Origin is the [idem.Intent] Origin the middleware (and so idem proxy)
// writes with every claim: the record's result is a [RecordedResponse].
// Whoever decides such a record outside the request path — reconciliation,
// a recovery hook, `idem resolve` — must store a RecordedResponse too, or
// every retry would get record-unreadable: [idem.EncodeDecision] does, with
// [EncodeDecision], which this package registers for Origin.
const Origin = "http"

func init() {
	idem.RegisterDecisionEncoder(Origin, idem.DecisionEncoderFunc(EncodeDecision))
}

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

// EncodeDecision encodes d as the response a record the middleware made
// replays: status d.Status (default 200 for succeeded, 500 for failed;
// 200–599), body d.Body, and Content-Type d.ContentType — by default
// application/json for a JSON body, or what the body's bytes look like;
// none without a body. d.Message is not sent: a decider that wants the
// client to read why puts it in the body (a problem document for an error
// status). Retries with the key replay it as they would the handler's own
// response.
func EncodeDecision(d idem.Decision) ([]byte, error) {
	status := d.Status
	if status == 0 {
		status = http.StatusOK
		if d.As == idem.StateFailed {
			status = http.StatusInternalServerError
		}
	}
	if status < 200 || status > 599 {
		return nil, fmt.Errorf("idemhttp: a decision's status must be a final HTTP status (200-599), got %d", status)
	}
	rr := &RecordedResponse{Status: status, Body: d.Body, Size: int64(len(d.Body))}
	ct := d.ContentType
	if ct == "" && len(d.Body) > 0 {
		ct = detectContentType(d.Body)
	}
	if ct != "" {
		rr.Header = http.Header{"Content-Type": {ct}}
	}
	return rr.Encode()
}

// detectContentType is application/json for a JSON text, which
// http.DetectContentType would call text/plain, and its sniffing otherwise.
func detectContentType(b []byte) string {
	if json.Valid(b) {
		return "application/json"
	}
	return http.DetectContentType(b)
}
