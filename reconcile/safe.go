package reconcile

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Report values come from outside: keys a client chose, scopes, a
// provider's files. Every writer passes them through these functions, so
// that a key cannot move the terminal's cursor, reorder a line with a
// bidirectional override, or become a spreadsheet formula.

// printable returns s unchanged when every rune of it is graphic (letters,
// marks, numbers, punctuation, symbols, spaces), and otherwise s quoted
// with Go's escapes ("a\x1b[2Jb", "\u202e…"): control characters, format
// characters (bidirectional overrides, zero-width joiners) and invalid
// UTF-8 are shown, never interpreted.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsGraphic(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}

// csvCell is s for a CSV report: printable, and neutralised against
// formula injection (OWASP's rule): a cell beginning with =, +, -, @, a
// tab or a carriage return gets a leading apostrophe, so a spreadsheet
// shows it as text instead of evaluating it.
func csvCell(s string) string {
	s = printable(s)
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// jsonSafe escapes, in JSON text written by encoding/json, the runes that
// encoding leaves raw but a terminal or an editor may interpret: DEL, the
// C1 controls and format characters (bidirectional overrides). They only
// occur inside strings, where \uXXXX keeps the value exact.
func jsonSafe(b []byte) []byte {
	clean := true
	for _, r := range string(b) {
		if unsafeJSONRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	var out strings.Builder
	for _, r := range string(b) {
		if !unsafeJSONRune(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff {
			r1, r2 := utf16Surrogates(r)
			out.WriteString(`\u` + hex4(r1) + `\u` + hex4(r2))
			continue
		}
		out.WriteString(`\u` + hex4(r))
	}
	return []byte(out.String())
}

func unsafeJSONRune(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Cf, r)
}

func utf16Surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

func hex4(r rune) string {
	s := strconv.FormatInt(int64(r), 16)
	return strings.Repeat("0", 4-len(s)) + s
}
