// Package httpsyntax holds the pieces of HTTP syntax (RFC 9110) that more
// than one package checks.
package httpsyntax

// IsToken reports whether s is a token (RFC 9110, section 5.6.2): one or
// more tchar, the syntax of a method, of a header field name and of a media
// type's type and subtype.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
