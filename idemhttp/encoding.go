package idemhttp

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// decodeFactor bounds a replayed body decoded for a client that does not
// accept its content coding: at most decodeFactor × MaxResponse bytes.
const decodeFactor = 32

// sendReplay writes a recorded response whose headers are already in w's
// header map, honouring the request's Accept-Encoding: a body recorded
// with a content coding goes as it is only to a client that accepts that
// coding; for any other it is decoded (gzip, deflate), or, when it cannot
// be, answered with a problem naming the coding.
func (m *Middleware) sendReplay(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	if ce := h["Content-Encoding"]; len(ce) > 0 && len(body) > 0 {
		codings := contentCodings(ce)
		if !allAccepted(r.Header["Accept-Encoding"], codings) {
			decoded, err := decodeBody(body, codings, decodeFactor*m.cfg.MaxResponse)
			if err != nil {
				p := problem(TypeEncodingNotAcceptable, http.StatusNotAcceptable, "recorded encoding not acceptable",
					"the request with this key was applied; its recorded response is encoded with "+strings.Join(codings, ", ")+
						", which this request's Accept-Encoding does not accept, and it cannot be decoded for it ("+err.Error()+
						"): retry with Accept-Encoding: "+strings.Join(codings, ", "))
				for k := range m.allow { // the recorded headers describe the recorded body
					if k != "Location" {
						delete(h, k)
					}
				}
				WriteProblem(w, p)
				return
			}
			body = decoded
			h.Del("Content-Encoding")
			// The decoded body is another representation: a strong
			// validator of the encoded one does not describe it.
			if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
				h.Set("ETag", "W/"+et)
			}
		}
	}
	w.WriteHeader(status)
	_ = writeClient(w, body, m.cfg.WriteTimeout)
}

// contentCodings lists the codings of Content-Encoding values, in the
// order they were applied, lower-cased, identity left out.
func contentCodings(vals []string) []string {
	var out []string
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				out = append(out, c)
			}
		}
	}
	return out
}

func allAccepted(accept []string, codings []string) bool {
	for _, c := range codings {
		if !acceptsCoding(accept, c) {
			return false
		}
	}
	return true
}

// acceptsCoding reports whether Accept-Encoding field values accept the
// content coding (lower case) with a non-zero weight, by name, by the
// equivalent x-gzip, or by "*" (RFC 9110 §12.5.3). A request without
// Accept-Encoding accepts none: RFC 9110 lets a server then send any
// coding, but clients that send no Accept-Encoding (curl without
// --compressed, many scripts) are the ones that do not decode.
func acceptsCoding(accept []string, coding string) bool {
	exact, star := -1.0, -1.0
	for _, v := range accept {
		for el := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(el, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			q := qValue(params)
			switch {
			case name == coding, sameCoding(name, coding):
				exact = max(exact, q)
			case name == "*":
				star = max(star, q)
			}
		}
	}
	if exact >= 0 {
		return exact > 0
	}
	return star > 0
}

// sameCoding reports codings RFC 9110 says are equivalent (x-gzip is gzip).
func sameCoding(a, b string) bool {
	norm := func(s string) string {
		if s == "x-gzip" {
			return "gzip"
		}
		return s
	}
	return norm(a) == norm(b)
}

// qValue is the weight in an Accept-Encoding element's parameters: 1
// without one, 0 when it is malformed (never more than 1).
func qValue(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || q < 0 || q > 1 || q != q {
			return 0
		}
		return q
	}
	return 1
}

var errDecodedTooLarge = errors.New("decoded, it exceeds the replay limit")

// decodeBody undoes codings (applied in order) on body, producing at most
// limit bytes.
func decodeBody(body []byte, codings []string, limit int64) ([]byte, error) {
	for i := len(codings) - 1; i >= 0; i-- {
		var rd io.Reader
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			rd, err = gzip.NewReader(bytes.NewReader(body))
		case "deflate":
			// HTTP's deflate is the zlib format; some servers send raw
			// deflate data instead.
			if rd, err = zlib.NewReader(bytes.NewReader(body)); err != nil {
				rd, err = flate.NewReader(bytes.NewReader(body)), nil
			}
		default:
			return nil, fmt.Errorf("idem cannot decode %s", codings[i])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", codings[i], err)
		}
		out, err := io.ReadAll(io.LimitReader(rd, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", codings[i], err)
		}
		if int64(len(out)) > limit {
			return nil, errDecodedTooLarge
		}
		body = out
	}
	return body, nil
}
