package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/reconcile/money"
)

// spooledOutcome names what a spooled outcome will do to its record.
func spooledOutcome(o *idem.SpooledOutcome) string {
	if o.Release {
		return "released"
	}
	return string(o.State)
}

// spooledJSON is a spooled outcome as idem list --json prints it: the
// record it will become, with "spooled": true.
func spooledJSON(o *idem.SpooledOutcome) map[string]any {
	j := map[string]any{"spooled": true, "scope": o.Scope, "key": o.Key, "outcome": spooledOutcome(o),
		"fence": o.Fence, "attempt_id": o.AttemptID, "completed_at": o.CompletedAt, "spooled_at": o.SpooledAt, "cause": o.Cause}
	if rr, err := idemhttp.DecodeResponse(o.Result); err == nil {
		j["http_status"] = rr.Status
	}
	return j
}

type recordJSON struct {
	Scope  string `json:"scope"`
	Key    string `json:"key"`
	State  string `json:"state"`
	Stored string `json:"stored_state"`
	// LeaseExpired is set for an in_progress record whose lease has
	// passed: State is then unknown, as every reader treats it.
	LeaseExpired bool            `json:"lease_expired"`
	Fence        int64           `json:"fence"`
	AttemptID    string          `json:"attempt_id"`
	Fingerprint  string          `json:"fingerprint"`
	Mark         string          `json:"mark,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	LeaseUntil   *time.Time      `json:"lease_until,omitempty"`
	CompletedAt  *time.Time      `json:"completed_at,omitempty"`
	ExpiresAt    *time.Time      `json:"expires_at,omitempty"`
	Intent       json.RawMessage `json:"intent,omitempty"`
	HTTPStatus   int             `json:"http_status,omitempty"`
	// Response is the recorded HTTP response (proxy and middleware
	// records), decoded.
	Response *responseJSON `json:"response,omitempty"`
	// Result is any other record's result: as text when it is UTF-8,
	// otherwise in ResultBase64.
	Result       string `json:"result,omitempty"`
	ResultBase64 []byte `json:"result_base64,omitempty"`
	// ResultError says why a result that looks like a recorded response
	// cannot be decoded (it replays as record-unreadable).
	ResultError string `json:"result_error,omitempty"`
}

// responseJSON is a recorded HTTP response as idem get --json prints it.
type responseJSON struct {
	Status     int                 `json:"status"`
	Header     map[string][]string `json:"header,omitempty"`
	Body       string              `json:"body,omitempty"`        // when the body is text
	BodyBase64 []byte              `json:"body_base64,omitempty"` // when it is not
	TooLarge   bool                `json:"too_large,omitempty"`
	Size       int64               `json:"size"`
}

func toJSON(r *idem.Record, now time.Time) recordJSON {
	j := recordJSON{Scope: r.Scope, Key: r.Key, State: string(r.EffectiveState(now)), Stored: string(r.State),
		LeaseExpired: r.LeaseExpired(now), Fence: r.Fence,
		AttemptID: r.AttemptID, Fingerprint: r.Fingerprint.String(), Mark: string(r.Mark), CreatedAt: r.CreatedAt,
		LeaseUntil: opt(r.LeaseUntil), CompletedAt: opt(r.CompletedAt), ExpiresAt: opt(r.ExpiresAt)}
	if json.Valid(r.Intent) {
		j.Intent = r.Intent
	}
	rr, err := idemhttp.DecodeResponse(r.Result)
	switch {
	case len(r.Result) > 0 && !idemhttp.MadeRecord(r):
		if utf8.Valid(r.Result) {
			j.Result = string(r.Result) // an engine caller's value, or a failure's message
		} else {
			j.ResultBase64 = r.Result
		}
	case err == nil:
		j.HTTPStatus = rr.Status
		j.Response = &responseJSON{Status: rr.Status, Header: rr.Header, TooLarge: rr.TooLarge, Size: rr.Size}
		if isText(rr.Header.Get("Content-Type"), rr.Body) {
			j.Response.Body = string(rr.Body)
		} else {
			j.Response.BodyBase64 = rr.Body
		}
	case len(r.Result) == 0:
	default:
		j.ResultBase64 = r.Result
		j.ResultError = "not a recorded HTTP response: " + err.Error()
	}
	return j
}

// isText reports whether a body is best shown as text: a textual media
// type (or none) and valid UTF-8.
func isText(contentType string, body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "", strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "json"), strings.HasSuffix(mt, "+json"),
		strings.HasSuffix(mt, "xml"), mt == "application/x-www-form-urlencoded", mt == "application/javascript":
		return true
	}
	return false
}

func opt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func writeJSON(f *flags, w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return f.fail(err)
	}
	return exitOK
}

// effState is the record's effective state (idem.Record.EffectiveState)
// for people, saying when it differs from the stored one because the lease
// expired.
func effState(r *idem.Record, now time.Time) string {
	if s := r.EffectiveState(now); s != r.State {
		return string(s) + " (lease expired)"
	}
	return string(r.State)
}

func httpStatus(r *idem.Record) string {
	rr, err := idemhttp.DecodeResponse(r.Result)
	if err != nil {
		return "-"
	}
	s := strconv.Itoa(rr.Status)
	if rr.TooLarge {
		s += " (too large)"
	}
	return s
}

func shortScope(s string) string {
	switch {
	case s == "":
		return "(global)"
	case len(s) > 16:
		return s[:16] + "…"
	}
	return s
}

func printRecord(w io.Writer, r *idem.Record, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("key", r.Key)
	row("scope", shortScope(r.Scope))
	row("state", effState(r, now))
	row("fence", strconv.FormatInt(r.Fence, 10))
	row("fingerprint", r.Fingerprint.String())
	row("created", r.CreatedAt.Format(time.RFC3339Nano))
	if r.State == idem.StateInProgress {
		row("lease until", r.LeaseUntil.Format(time.RFC3339Nano))
	}
	if !r.CompletedAt.IsZero() {
		row("completed", r.CompletedAt.Format(time.RFC3339Nano))
	}
	if !r.ExpiresAt.IsZero() {
		row("expires", r.ExpiresAt.Format(time.RFC3339Nano))
	}
	if r.Mark != idem.MarkNone {
		row("mark", string(r.Mark))
	}
	if in, err := idem.DecodeIntent(r.Intent); err == nil && in != nil {
		intentRows(row, in)
	}
	rr, err := idemhttp.DecodeResponse(r.Result)
	switch {
	case len(r.Result) > 0 && !idemhttp.MadeRecord(r):
		// An engine caller's value, in the application's codec.
		row("value", valuePreview(r.Result))
	case err == nil:
		desc := fmt.Sprintf("%d, %d body bytes", rr.Status, rr.Size)
		if rr.TooLarge {
			desc += " (too large to record: a replay answers response-too-large with this status)"
		}
		row("response", desc)
		names := make([]string, 0, len(rr.Header))
		for k := range rr.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			row("  "+k, strings.Join(rr.Header[k], ", "))
		}
		_ = tw.Flush()
		printBody(w, rr.Header.Get("Content-Type"), rr.Body)
		return
	case len(r.Result) == 0:
	default:
		// Made over HTTP, yet not a recorded response: it replays as
		// record-unreadable; say why.
		row("result", fmt.Sprintf("%d bytes, not a recorded HTTP response (%v); --body-out FILE writes them", len(r.Result), err))
	}
	_ = tw.Flush()
}

// valuePreview shows a recorded value: its size, and the bytes when they
// are short printable text.
func valuePreview(b []byte) string {
	s := fmt.Sprintf("%d bytes", len(b))
	if len(b) <= 200 && utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r < 0x20 && r != '\t' }) {
		s += ": " + string(b)
	}
	return s
}

// intentRows adds the intent journal's fields to a record's table.
func intentRows(row func(k, v string), in *idem.Intent) {
	if in.Operation != "" {
		row("operation", in.Operation)
	}
	if in.Amount != 0 || in.Currency != "" {
		row("amount", money.Display(in.Amount, in.Currency))
	}
	if in.Counterparty != "" {
		row("counterparty", in.Counterparty)
	}
	if in.ForwardKey != "" {
		row("forward key", in.ForwardKey)
	}
	names := make([]string, 0, len(in.Fields))
	for k := range in.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := in.Fields[k]
		if len(v) > 80 {
			v = v[:77] + "..."
		}
		row("intent."+k, v)
	}
}

// printBody prints a recorded body below the table: as text when it is
// text, else its size and how to get the bytes.
func printBody(w io.Writer, contentType string, body []byte) {
	switch {
	case len(body) == 0:
		return
	case isText(contentType, body):
		fmt.Fprintf(w, "\n%s", body)
		if body[len(body)-1] != '\n' {
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "\n(%d bytes of %s; --body-out FILE writes them)\n", len(body), contentType)
	}
}

// bodyBytes is what --body-out writes: a recorded response's body, or any
// other record's result as stored.
func bodyBytes(r *idem.Record) []byte {
	if rr, err := idemhttp.DecodeResponse(r.Result); err == nil {
		return rr.Body
	}
	return r.Result
}

// intentColumns are idem list's METHOD, PATH and AMOUNT: what the intent
// journal says the call was ("-" where it says nothing). The proxy records
// method and path; the amount is the intent's (--intent amount=…, or what
// the application wrote), printed as money: "1250.00 EUR" for 125000 minor
// units, or minor units labelled so when the intent names no currency.
func intentColumns(r *idem.Record) (method, path, amount string) {
	method, path, amount = "-", "-", "-"
	in, err := idem.DecodeIntent(r.Intent)
	if err != nil || in == nil {
		return
	}
	if v := in.Fields["method"]; v != "" {
		method = v
	} else if in.Operation != "" {
		method = in.Operation
	}
	if v := in.Fields["path"]; v != "" {
		path = v
	}
	if in.Amount != 0 || in.Currency != "" {
		amount = money.Display(in.Amount, in.Currency)
	}
	return
}
