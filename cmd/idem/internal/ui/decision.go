package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemmcp"
	"github.com/idemkit/idem/memstore"
)

// ErrDecision: a decision was refused before anything was written,
// because retries would replay something the operator did not mean or a
// client could not read. Its message says what to change.
var ErrDecision = errors.New("decision refused")

// refused is an ErrDecision with the operator's message.
type refused string

func (r refused) Error() string        { return string(r) }
func (r refused) Is(target error) bool { return target == ErrDecision }

// Messages of validateDecision that tests and other pages look for.
const (
	msgChoose      = "Choose a decision: succeeded, failed or released."
	msgReason      = "A reason is required: every decision is logged with who took it and why."
	msgEmptyOK     = "An empty body on succeeded is refused"
	msgNoStatus    = "A succeeded decision needs the HTTP status the provider's answer had"
	msgInvalidJSON = "The body is not valid JSON"
)

// validateDecision checks an operator's decision d against the record it
// decides, before anything is written or encoded. Every page that decides
// (one record, or many at once) calls it, so that a decision cannot
// replay something that lies:
//
//   - As is succeeded, failed or released, and a reason is given; the
//     operator is named.
//   - released records nothing: no status, body or content type.
//   - On a record made over HTTP (idemhttp, idem proxy), succeeded needs
//     a 2xx status and a body — the answer the provider gave, which every
//     retry will get — except for 204 and 205, which carry none and must
//     have none. failed may leave both out (500, no body).
//   - A body must be valid JSON when its content type is JSON, when no
//     content type is given and it looks like JSON (starts with { or [),
//     or when the record shows the call spoke JSON (its request's media
//     type in the intent's content_type field, or a recorded response's
//     Content-Type); a content type given must parse as a media type, and
//     be a JSON one on a record that spoke JSON.
//   - On a record made otherwise, status and content type do not apply;
//     succeeded needs a body: for an engine caller its value as the
//     default codec writes it (JSON), for gRPC the response as protojson
//     (JSON), for MCP the tool result.
//
// It returns an error that errors.Is ErrDecision, with a message written
// for the operator.
func validateDecision(rec *idem.Record, d Decision) error {
	switch d.As {
	case "succeeded", "failed", "released":
	default:
		return refused(msgChoose)
	}
	if strings.TrimSpace(d.Reason) == "" {
		return refused(msgReason)
	}
	if strings.TrimSpace(d.Operator) == "" {
		return refused("No operator is named for this decision; log in again.")
	}
	if d.As == "released" {
		if d.Status != 0 || d.HasBody || d.ContentType != "" {
			return refused("A release records nothing (the next retry runs the request again): leave status, content type and body empty.")
		}
		return nil
	}
	body := d.Body
	if !d.HasBody {
		body = nil
	}
	if !idemhttp.MadeRecord(rec) {
		return validateOther(rec, d, body)
	}
	if d.Status != 0 && (d.Status < 200 || d.Status > 599) {
		return refused("The status must be a final HTTP status (200–599).")
	}
	if d.As == "succeeded" {
		switch {
		case d.Status == 0:
			return refused(msgNoStatus + " (201 for a created charge, 200 …): every retry gets it.")
		case d.Status < 200 || d.Status > 299:
			return refused("A succeeded decision replays a 2xx status, got " + strconv.Itoa(d.Status) + ": for an error answer decide failed.")
		}
		noContent := d.Status == http.StatusNoContent || d.Status == http.StatusResetContent
		if noContent && len(body) > 0 {
			return refused("A " + strconv.Itoa(d.Status) + " answer carries no body: leave the body empty, or give the status the provider answered with its body.")
		}
		if !noContent && len(bytes.TrimSpace(body)) == 0 {
			return refused(msgEmptyOK + ": every retry would get " + strconv.Itoa(d.Status) +
				" with no body and no content type, and a client that cannot read the answer may pay again. " +
				"Paste the provider's answer exactly as it gave it (its object from the provider's dashboard or API), " +
				"or decide released if nothing happened. Only 204 and 205 answers are empty.")
		}
	}
	spoke := recordedJSON(rec)
	if d.ContentType != "" {
		mt, _, err := mime.ParseMediaType(d.ContentType)
		if err == nil && !strings.Contains(strings.Trim(mt, "/"), "/") {
			err = errors.New("want type/subtype")
		}
		if err != nil {
			return refused("The content type " + strconv.Quote(d.ContentType) + " is not a media type (" + err.Error() + "); leave it empty to have it detected.")
		}
		if spoke != "" && len(body) > 0 && !isJSONType(mt) {
			return refused("This call spoke JSON (" + spoke + "): the body replayed must be JSON, not " + mt + ".")
		}
	}
	if len(body) == 0 {
		return nil
	}
	why := ""
	switch {
	case d.ContentType != "" && isJSONType(mediaType(d.ContentType)):
		why = "its content type is " + d.ContentType
	case spoke != "":
		why = "this call spoke JSON (" + spoke + ")"
	case d.ContentType == "" && looksJSON(body):
		why = "it starts like JSON and no other content type was given"
	}
	if why != "" {
		if err := jsonError(body); err != nil {
			return refused(msgInvalidJSON + " (" + err.Error() + ") and must be: " + why + ". Paste the provider's answer exactly.")
		}
	}
	return nil
}

// validateOther checks a decision on a record not made over HTTP.
func validateOther(rec *idem.Record, d Decision, body []byte) error {
	origin := rec.Origin()
	if d.Status != 0 || d.ContentType != "" {
		return refused("This record was not made over HTTP (origin " + strconv.Quote(origin) + "): a status and a content type do not apply; leave them empty.")
	}
	switch origin {
	case "":
		if d.As == "succeeded" && len(bytes.TrimSpace(body)) == 0 {
			return refused(msgEmptyOK + ": this record was made by an application through the engine, and its retries replay the value given here (JSON, the engine's default codec). For a value in another codec use idem resolve --body FILE.")
		}
		if len(body) > 0 {
			if err := jsonError(body); err != nil {
				return refused(msgInvalidJSON + " (" + err.Error() + "): an engine caller's value is JSON with the default codec; for another codec use idem resolve --body FILE.")
			}
		}
	case idemgrpc.Origin:
		if len(body) > 0 {
			if err := jsonError(body); err != nil {
				return refused(msgInvalidJSON + " (" + err.Error() + "): a gRPC response is given as protojson.")
			}
		}
	case idemmcp.Origin:
		if d.As == "succeeded" && len(bytes.TrimSpace(body)) == 0 {
			return refused(msgEmptyOK + ": retries of this MCP tool call replay the tool result given here (JSON, or the text it answers).")
		}
	}
	return nil
}

// recordedJSON names how rec shows its call spoke JSON: the request's
// media type the intent recorded, or a recorded response's Content-Type;
// "" when it shows neither.
func recordedJSON(rec *idem.Record) string {
	if in, err := idem.DecodeIntent(rec.Intent); err == nil && in != nil {
		for _, k := range []string{"content_type", "content-type"} {
			if v := in.Fields[k]; v != "" && isJSONType(mediaType(v)) {
				return "request " + v
			}
		}
	}
	if len(rec.Result) > 0 {
		if rr, err := idemhttp.DecodeResponse(rec.Result); err == nil {
			if v := rr.Header.Get("Content-Type"); isJSONType(mediaType(v)) {
				return "recorded response " + v
			}
		}
	}
	return ""
}

func mediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}

func isJSONType(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

func looksJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// jsonError is nil for a JSON text, else where and why it does not parse.
func jsonError(b []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("at byte %d: %s", se.Offset, se.Error())
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("more after the JSON value at byte %d", dec.InputOffset())
	}
	return nil
}

// encodeDecision is the result d records on rec, exactly as idem ui's
// Decide (and idem resolve) encode it: [idem.EncodeDecision] with the
// record's origin's encoder.
func encodeDecision(rec *idem.Record, d Decision) ([]byte, error) {
	dec := idem.Decision{As: idem.State(d.As), Status: d.Status, ContentType: d.ContentType, Message: d.Reason}
	if d.HasBody {
		dec.Body = d.Body
	}
	return idem.EncodeDecision(rec, dec)
}

// preview is what the next retry of a record will receive once a
// decision is applied.
type preview struct {
	As       string
	Released bool
	// HTTP: Status, Headers and Body (or Binary bytes) as idemhttp's
	// replay answers them.
	HTTP    bool
	Status  int
	Headers [][2]string
	Body    string
	Binary  int
	Empty   bool
	// Value is what another origin's retries decode.
	Value string
	// Hash is the SHA-256 (hex) of the result recorded; the decision form
	// carries it back, and a decision whose result differs from the one
	// previewed is not applied.
	Hash string
}

// previewDecision validates d and returns what retries of rec will
// receive, with the result it records. For a record made over HTTP the
// answer is the one idemhttp's middleware replays: the result is recorded
// on a scratch record in a memory store and a request with its key is
// sent through a middleware, whose answer is the preview.
func previewDecision(ctx context.Context, rec *idem.Record, d Decision) (*preview, []byte, error) {
	if err := validateDecision(rec, d); err != nil {
		return nil, nil, err
	}
	p := &preview{As: d.As}
	if d.As == "released" {
		p.Released = true
		return p, nil, nil
	}
	result, err := encodeDecision(rec, d)
	if err != nil {
		return nil, nil, refused("Not encodable for this record: " + err.Error())
	}
	p.Hash = resultHash(result)
	if !idemhttp.MadeRecord(rec) {
		p.Value = clip(string(result))
		return p, result, nil
	}
	status, h, body, err := replayHTTP(ctx, idem.State(d.As), result)
	if err != nil {
		return nil, nil, err
	}
	p.HTTP, p.Status, p.Empty = true, status, len(body) == 0
	for k, vs := range h {
		p.Headers = append(p.Headers, [2]string{k, strings.Join(vs, ", ")})
	}
	sortPairs(p.Headers)
	if isText(body) {
		p.Body = clip(string(body))
	} else {
		p.Binary = len(body)
	}
	return p, result, nil
}

func resultHash(result []byte) string {
	h := sha256.Sum256(result)
	return hex.EncodeToString(h[:])
}

// replayHTTP answers what idemhttp's middleware replays for a record
// decided as with result: a first request makes the record, the decision
// is applied to it, and the same request sent again is answered from it.
func replayHTTP(ctx context.Context, as idem.State, result []byte) (int, http.Header, []byte, error) {
	st := memstore.New()
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := idem.New(st, idem.Config{Logger: quiet, AllowVolatileStore: true})
	if err != nil {
		return 0, nil, nil, err
	}
	defer eng.Close()
	mw, err := idemhttp.New(eng, idemhttp.Config{Scope: idemhttp.GlobalScope, Logger: quiet})
	if err != nil {
		return 0, nil, nil, err
	}
	ran := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.WriteHeader(http.StatusAccepted)
	}))
	const key = "idem-ui-preview"
	req := func() *http.Request {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/preview", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", `"`+key+`"`)
		return r
	}
	h.ServeHTTP(httptest.NewRecorder(), req())
	recs, err := st.List(ctx, idem.ListFilter{Limit: 1})
	if err != nil || len(recs) != 1 || ran != 1 {
		return 0, nil, nil, fmt.Errorf("ui: preview: the scratch record was not made (%v)", err)
	}
	if _, err := eng.Resolve(ctx, recs[0].Scope, idem.Key(recs[0].Key), idem.Resolution{Force: true, As: as, Result: result,
		Actor: "preview", Reason: "preview"}); err != nil {
		return 0, nil, nil, fmt.Errorf("ui: preview: %w", err)
	}
	rw := httptest.NewRecorder()
	h.ServeHTTP(rw, req())
	if ran != 1 {
		return 0, nil, nil, errors.New("ui: preview: the decided record was not replayed")
	}
	return rw.Code, rw.Result().Header, rw.Body.Bytes(), nil
}
