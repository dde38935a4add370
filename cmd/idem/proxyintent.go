package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
)

// stringsFlag collects a repeatable flag's values.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// intentField is one --intent FIELD=POINTER: where in a request body an
// intent field is found.
type intentField struct {
	field string // amount, currency, operation, counterparty, or a Fields name
	// pointer is an RFC 6901 JSON Pointer ("/amount", "/customer/id") for a
	// JSON body; for a form body the part after the leading "/" (or the
	// whole, without one) is the form field's name.
	pointer string
}

// intentFlag collects --intent FIELD=POINTER.
type intentFlag []intentField

func (f *intentFlag) String() string { return "" }

func (f *intentFlag) Set(v string) error {
	name, ptr, ok := strings.Cut(v, "=")
	if !ok || name == "" || ptr == "" {
		return fmt.Errorf("want FIELD=POINTER (e.g. amount=/amount), got %q", v)
	}
	if !isToken(name) {
		return fmt.Errorf("field %q is not a plain name", name)
	}
	for _, x := range *f {
		if x.field == name {
			return fmt.Errorf("field %q given twice", name)
		}
	}
	*f = append(*f, intentField{field: name, pointer: ptr})
	return nil
}

// maxIntentValue bounds one intent value taken from a request, so a client
// cannot make the stored record large through it.
const maxIntentValue = 256

// proxyIntent returns the middleware's intent hook for the proxy: the
// request's method, path and media type (content_type) always (an
// operator deciding an unknown record must see which call it was, and
// idem ui holds a decision on a JSON call to a JSON body), and the
// --intent fields read from the body.
func proxyIntent(fields intentFlag) func(r *http.Request, body []byte, in *idem.Intent) {
	return func(r *http.Request, body []byte, in *idem.Intent) {
		if in.Fields == nil {
			in.Fields = make(map[string]string, 2+len(fields))
		}
		in.Fields["method"] = r.Method
		in.Fields["path"] = clip(r.URL.Path)
		// The request's media type: an operator deciding the record in
		// idem ui must give a JSON answer to a call that spoke JSON.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil {
			in.Fields["content_type"] = clip(mt)
		}
		if len(fields) == 0 || len(body) == 0 {
			return
		}
		lookup := bodyLookup(r.Header.Get("Content-Type"), body)
		if lookup == nil {
			return
		}
		for _, f := range fields {
			v, ok := lookup(f.pointer)
			if !ok {
				continue
			}
			v = clip(v)
			switch f.field {
			case "amount":
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					in.Amount = n
				} else {
					in.Fields["amount"] = v // not integer minor units: kept as sent
				}
			case "currency":
				in.Currency = strings.ToUpper(v)
			case "operation":
				in.Operation = v
			case "counterparty":
				in.Counterparty = v
			default:
				in.Fields[f.field] = v
			}
		}
	}
}

func clip(s string) string {
	if len(s) > maxIntentValue {
		return s[:maxIntentValue]
	}
	return s
}

// bodyLookup returns a function that finds a value in a JSON or form body,
// or nil for other bodies.
func bodyLookup(contentType string, body []byte) func(ptr string) (string, bool) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil
		}
		return func(ptr string) (string, bool) {
			name := strings.TrimPrefix(ptr, "/")
			if !form.Has(name) {
				return "", false
			}
			return form.Get(name), true
		}
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return nil
		}
		return func(ptr string) (string, bool) { return jsonPointer(doc, ptr) }
	}
	return nil
}

// jsonPointer resolves an RFC 6901 pointer in a decoded document and
// returns a scalar's text (a string as is, a number as written, true or
// false); objects, arrays, null and missing members give false.
func jsonPointer(doc any, ptr string) (string, bool) {
	if ptr != "" && ptr[0] != '/' {
		return "", false
	}
	cur := doc
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch v := cur.(type) {
			case map[string]any:
				next, ok := v[tok]
				if !ok {
					return "", false
				}
				cur = next
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
					return "", false
				}
				cur = v[i]
			default:
				return "", false
			}
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
