// Package jsonmembers rewrites a JSON object's top-level members, for the
// tools that probe idempotency (idemtest, idem audit): a body that is
// another request (Changed) and the same document in other bytes
// (Reordered).
package jsonmembers

import (
	"encoding/json"
	"strings"
)

// ChangedMember is the member name Changed adds.
const ChangedMember = "idem_changed"

// Changed returns a body that is another request than body: body with a
// member ChangedMember added when it is a JSON object, body with
// " (changed)" appended otherwise.
func Changed(body string) string {
	if ms, ok := split(body); ok {
		ms = append(ms, member{name: ChangedMember, value: json.RawMessage("true")})
		return join(ms, "", "")
	}
	return body + " (changed)"
}

// Reordered returns body with its top-level members in reverse order and
// whitespace added: the same JSON document in other bytes. ok is false when
// body is not a JSON object.
func Reordered(body string) (string, bool) {
	ms, ok := split(body)
	if !ok {
		return "", false
	}
	rev := make([]member, len(ms))
	for i, m := range ms {
		rev[len(ms)-1-i] = m
	}
	return join(rev, " ", "\n"), true
}

type member struct {
	name  string
	value json.RawMessage
}

// split returns a JSON object's members in order.
func split(body string) ([]member, bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{name: name, value: v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // something after the object
	}
	return out, true
}

func join(ms []member, sp, nl string) string {
	var b strings.Builder
	b.WriteString("{" + nl)
	for i, m := range ms {
		if i > 0 {
			b.WriteString("," + nl)
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteString(sp + ":" + sp)
		b.Write(m.value)
	}
	b.WriteString(nl + "}")
	return b.String()
}
