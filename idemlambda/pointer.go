package idemlambda

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrPointer is matched (errors.Is) by the error for a JSON pointer that
// is malformed or finds nothing in an event.
var ErrPointer = errors.New("idemlambda: JSON pointer")

// Pointer is a JSON pointer (RFC 6901) into an event, as the event
// arrives (the JSON the Lambda runtime hands the function). A string
// holding JSON — an API Gateway or SQS body — is entered as a document:
// "/body/order/id" reads the order id inside the body, as Powertools'
// powertools_json(body).order.id does.
type Pointer struct {
	raw   string
	parts []string
}

// ParsePointer parses a JSON pointer: "" (the whole event) or "/"-led
// reference tokens with ~0 and ~1 escapes.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return Pointer{}, fmt.Errorf("%w %q: must be empty or start with '/'", ErrPointer, s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(p, "~0", ""), "~1", ""), "~") {
			return Pointer{}, fmt.Errorf("%w %q: '~' must be followed by 0 or 1", ErrPointer, s)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return Pointer{raw: s, parts: parts}, nil
}

// MustPointer is ParsePointer for pointers written in the program; it
// panics on a malformed one.
func MustPointer(s string) Pointer {
	p, err := ParsePointer(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pointer as written.
func (p Pointer) String() string { return p.raw }

// Lookup returns the value the pointer finds in doc (decoded JSON), or
// an error wrapping ErrPointer.
func (p Pointer) Lookup(doc any) (any, error) {
	cur := doc
	for i, tok := range p.parts {
		if s, ok := cur.(string); ok {
			inner, err := decodeJSON([]byte(s))
			if err != nil {
				return nil, fmt.Errorf("%w %q: %q is a string that is not JSON", ErrPointer, p.raw, "/"+strings.Join(p.parts[:i], "/"))
			}
			cur = inner
		}
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, fmt.Errorf("%w %q: no member %q", ErrPointer, p.raw, tok)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, fmt.Errorf("%w %q: no element %q", ErrPointer, p.raw, tok)
			}
			cur = v[n]
		default:
			return nil, fmt.Errorf("%w %q: nothing under %q", ErrPointer, p.raw, "/"+strings.Join(p.parts[:i], "/"))
		}
	}
	if cur == nil {
		return nil, fmt.Errorf("%w %q: null", ErrPointer, p.raw)
	}
	return cur, nil
}

// keyString renders a found value as a key: a string as it is, a number
// or boolean as its JSON; an object or array is refused (Powertools
// hashes them into a key; idem keys are the caller's identities, and an
// object is a payload).
func keyString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("%w: the key's pointer finds an object or array, not a string or number", ErrPointer)
}

// decodeJSON decodes one JSON document, keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}
