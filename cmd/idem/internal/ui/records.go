package ui

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/reconcile/money"
)

// row is a record as the list and the record page show it.
type row struct {
	Scope, Key string
	State      string // effective: an in_progress record past its lease is unknown
	Stored     string
	Fence      int64
	Attempt    string
	Created    time.Time
	Age        time.Duration
	Method     string
	Path       string
	Operation  string
	Amount     string
	Intent     *idem.Intent
	Fields     [][2]string
	Attempts   int64
	Version    string
	Link       string
	// SealedKey names the key an intent encrypted at rest is sealed with,
	// when this server cannot open it (no --encryption-key-file, or a file
	// without that key).
	SealedKey string
	// BodyDigest is the request body's digest idemhttp records (xxh64),
	// when it does: the body itself is never stored.
	BodyDigest string
}

// version names a record as loaded: it changes whenever anything a
// decision rests on changes — a resolution or re-claim (fence, attempt),
// an outcome arriving late (state), or the record being released and
// claimed anew (attempt, creation time), which can bring the fence back
// to 1. The fence alone would miss that last one.
func version(r *idem.Record, now time.Time) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", r.Fence, r.AttemptID, r.EffectiveState(now), r.CreatedAt.UnixMicro())
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Sel is the value of the row's bulk checkbox: the record and its
// version as the list showed it, so that a bulk decision skips a record
// that changed since.
func (w row) Sel() string {
	b, _ := json.Marshal([]string{w.Scope, w.Key, w.Version})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseSel reads a bulk checkbox's value.
func parseSel(s string) (scope, key, ver string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", "", "", false
	}
	var v []string
	if json.Unmarshal(b, &v) != nil || len(v) != 3 || v[1] == "" {
		return "", "", "", false
	}
	return v[0], v[1], v[2], true
}

func toRow(r *idem.Record, now time.Time) row {
	w := row{Scope: r.Scope, Key: r.Key, State: string(r.EffectiveState(now)), Stored: string(r.State),
		Fence: r.Fence, Attempt: r.AttemptID, Created: r.CreatedAt, Age: now.Sub(r.CreatedAt),
		Method: "-", Path: "-", Operation: "-", Amount: "-", Attempts: r.Fence, Version: version(r, now),
		Link: recordLink(r.Scope, r.Key)}
	if id, ok := idem.SealedKeyID(r.Intent); ok {
		w.SealedKey = id
		if id == "" {
			w.SealedKey = "(unnamed)"
		}
	}
	in, err := idem.DecodeIntent(r.Intent)
	if err == nil && in != nil {
		w.Intent = in
		w.BodyDigest = in.Fields["body_xxh64"]
		if v := in.Fields["method"]; v != "" {
			w.Method = v
		}
		if v := in.Fields["path"]; v != "" {
			w.Path = v
		}
		if in.Operation != "" {
			w.Operation = in.Operation
		}
		if in.Amount != 0 || in.Currency != "" {
			w.Amount = formatAmount(in.Amount, in.Currency)
		}
		for k, v := range in.Fields {
			if k == "method" || k == "path" || k == "body_xxh64" {
				continue // shown apart; idemhttp's member digests explain a 422 to a client, not to people
			}
			w.Fields = append(w.Fields, [2]string{k, v})
		}
		sortPairs(w.Fields)
	}
	return w
}

// formatAmount shows minor units as money: the major amount by the
// currency's ISO 4217 digits ("12.50 EUR", "5000 JPY", "1.250 KWD"), or
// minor units labelled so when the currency is missing or unknown.
func formatAmount(minor int64, currency string) string {
	return money.Display(minor, strings.ToUpper(currency))
}

func sortPairs(p [][2]string) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j][0] < p[j-1][0]; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

func recordLink(scope, key string) string {
	return "/record?scope=" + urlQuery(scope) + "&key=" + urlQuery(key)
}

// response is a recorded result as the record page shows it.
type response struct {
	HTTP     bool
	Status   int
	Headers  [][2]string
	Body     string
	Binary   int // bytes, when the body is not text
	TooLarge bool
	Value    string // an engine caller's value (or failure)
	Problem  string
}

// maxShownBody bounds the body a record page prints.
const maxShownBody = 64 << 10

func toResponse(r *idem.Record) *response {
	if len(r.Result) == 0 {
		return nil
	}
	if !idemhttp.MadeRecord(r) {
		return &response{Value: clip(string(r.Result))}
	}
	rr, err := idemhttp.DecodeResponse(r.Result)
	if err != nil {
		return &response{HTTP: true, Problem: "not a recorded HTTP response: " + err.Error()}
	}
	out := &response{HTTP: true, Status: rr.Status, TooLarge: rr.TooLarge}
	for k, vs := range rr.Header {
		out.Headers = append(out.Headers, [2]string{k, strings.Join(vs, ", ")})
	}
	sortPairs(out.Headers)
	if isText(rr.Body) {
		out.Body = clip(string(rr.Body))
	} else {
		out.Binary = len(rr.Body)
	}
	return out
}

func isText(b []byte) bool {
	if !json.Valid(b) {
		for _, c := range string(b) {
			if c == '\uFFFD' || (c < 0x20 && c != '\n' && c != '\r' && c != '\t') {
				return false
			}
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > maxShownBody {
		return s[:maxShownBody] + "\n… (cut at 64 KiB)"
	}
	return s
}

// cursor is the position after which the next page of the unknown list
// starts, in the store's List order (created, scope, key). It travels in
// the page's links as base64url JSON.
func encodeCursor(c *idem.Cursor) string {
	if c == nil {
		return ""
	}
	b, _ := json.Marshal([]any{c.CreatedAt.UnixMicro(), c.Scope, c.Key})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*idem.Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad page cursor")
	}
	var v []json.RawMessage
	var micros int64
	var c idem.Cursor
	if json.Unmarshal(b, &v) != nil || len(v) != 3 || json.Unmarshal(v[0], &micros) != nil ||
		json.Unmarshal(v[1], &c.Scope) != nil || json.Unmarshal(v[2], &c.Key) != nil {
		return nil, fmt.Errorf("bad page cursor")
	}
	c.CreatedAt = time.UnixMicro(micros).UTC()
	return &c, nil
}
