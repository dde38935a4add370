package nounique

import (
	"regexp"
	"strings"
)

// Finding is one dedup table without uniqueness on its key.
type Finding struct {
	Offset  int    // of CREATE
	Table   string // as written, unquoted
	Column  string // the key column, or "" when none was recognised
	FixAt   int    // where " UNIQUE" goes, or -1
	Message string
}

var (
	createRE    = regexp.MustCompile("(?is)\\bcreate\\s+(?:(?:global\\s+|local\\s+)?(?:temporary|temp)\\s+|unlogged\\s+)?table\\s+(?:if\\s+not\\s+exists\\s+)?([\\w.\"`\\[\\]{}]+)\\s*\\(")
	uniqueIdxRE = regexp.MustCompile("(?is)\\bcreate\\s+unique\\s+index\\s+(?:concurrently\\s+)?(?:if\\s+not\\s+exists\\s+)?(?:[\\w.\"`]+\\s+)?on\\s+(?:only\\s+)?([\\w.\"`\\[\\]{}]+)\\s*(?:using\\s+\\w+\\s*)?\\(([^)]*)\\)")
	alterRE     = regexp.MustCompile("(?is)\\balter\\s+table\\s+(?:only\\s+)?(?:if\\s+exists\\s+)?([\\w.\"`\\[\\]{}]+)\\s+add\\s+(?:constraint\\s+[\\w\"`]+\\s+)?(?:primary\\s+key|unique)(?:\\s+(?:key|index)\\s*[\\w\"`]*)?\\s*\\(([^)]*)\\)")
	dedupRE     = regexp.MustCompile(`(?i)idem|dedup|processed|inbox|seen|consumed|handled`)
	keyColRE    = regexp.MustCompile(`(?i)^(key|.*idempoten.*|.*dedup.*|idem_key|.*_key|message_id|msg_id|event_id|request_id|delivery_id)$`)
	uniqueRE    = regexp.MustCompile(`(?i)\b(primary\s+key|unique)\b`)
	indexDef    = regexp.MustCompile("(?is)^(key|index)\\s+[\\w`\"]*\\s*\\(\\s*[^\\d\\s)]")
)

// Check reports the dedup tables of a SQL text that have no PRIMARY KEY or
// UNIQUE on their key column.
func Check(sql string) []Finding {
	var out []Finding
	extra := map[string][][]string{} // table -> unique column sets from indexes, ALTERs
	for _, m := range uniqueIdxRE.FindAllStringSubmatch(sql, -1) {
		extra[tableName(m[1])] = append(extra[tableName(m[1])], columns(m[2]))
	}
	for _, m := range alterRE.FindAllStringSubmatch(sql, -1) {
		extra[tableName(m[1])] = append(extra[tableName(m[1])], columns(m[2]))
	}
	for _, m := range createRE.FindAllStringSubmatchIndex(sql, -1) {
		name := tableName(sql[m[2]:m[3]])
		if !dedupRE.MatchString(name) {
			continue
		}
		open := m[1] - 1
		end := matching(sql, open)
		if end < 0 {
			continue
		}
		uniq := append([][]string(nil), extra[name]...)
		type col struct {
			name     string
			end      int // offset after the definition
			fixable  bool
			inlineUQ bool
		}
		var cols []col
		for _, it := range items(sql, open+1, end) {
			text := sql[it[0]:it[1]]
			t := strings.TrimSpace(stripComments(text))
			if t == "" {
				continue
			}
			first := strings.ToLower(strings.Fields(t)[0])
			if (first == "key" || first == "index") && !indexDef.MatchString(t) {
				first = "" // a column named key
			}
			switch first {
			case "constraint", "primary", "unique", "key", "index", "check", "foreign", "exclude", "fulltext", "spatial":
				if uniqueRE.MatchString(t) {
					if i := strings.Index(t, "("); i >= 0 {
						if j := strings.LastIndex(t, ")"); j > i {
							uniq = append(uniq, columns(t[i+1:j]))
						}
					}
				}
				continue
			}
			c := col{name: unquote(strings.Fields(t)[0]), inlineUQ: uniqueRE.MatchString(t)}
			// The fix goes after the definition's last non-space byte,
			// when the definition holds no comment.
			e := it[1]
			for e > it[0] && strings.ContainsRune(" \t\r\n", rune(sql[e-1])) {
				e--
			}
			c.end, c.fixable = e, !strings.Contains(text, "--") && !strings.Contains(text, "/*")
			if c.inlineUQ {
				uniq = append(uniq, []string{c.name})
			}
			cols = append(cols, c)
		}
		var key *col
		for i := range cols {
			if keyColRE.MatchString(cols[i].name) {
				key = &cols[i]
				break
			}
		}
		f := Finding{Offset: m[0], Table: name, FixAt: -1}
		switch {
		case key != nil:
			if covered(uniq, key.name) {
				continue
			}
			f.Column = key.name
			if key.fixable {
				f.FixAt = key.end
			}
			f.Message = "dedup table " + name + " has no PRIMARY KEY or UNIQUE on its key column " + key.name + ": two claimers of one key both insert, and both run the effect; the unique constraint is the whole mechanism (" + key.name + " … UNIQUE, or PRIMARY KEY (scope, " + key.name + "))"
		case len(uniq) == 0:
			f.Message = "dedup table " + name + " has no PRIMARY KEY or UNIQUE constraint: two claimers of one key both insert, and both run the effect; put a unique constraint on its key"
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

func covered(sets [][]string, c string) bool {
	for _, s := range sets {
		for _, x := range s {
			if strings.EqualFold(x, c) {
				return true
			}
		}
	}
	return false
}

func tableName(s string) string {
	s = unquote(s)
	if i := strings.LastIndex(s, "."); i >= 0 {
		s = s[i+1:]
	}
	return unquote(s)
}

func unquote(s string) string { return strings.Trim(s, "\"`[]") }

func columns(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if f := strings.Fields(p); len(f) > 0 {
			c := f[0]
			if i := strings.Index(c, "("); i >= 0 { // MySQL prefix length: key(64)
				c = c[:i]
			}
			out = append(out, unquote(c))
		}
	}
	return out
}

// matching returns the offset of the parenthesis closing the one at open,
// skipping quoted strings and comments, or -1.
func matching(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return -1
			}
			i += j + 1
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return -1
			}
			i += j
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// items splits s[from:to] at top-level commas.
func items(s string, from, to int) [][2]int {
	var out [][2]int
	depth, start := 0, from
	for i := from; i < to; i++ {
		switch c := s[i]; {
		case c == '\'':
			if j := strings.IndexByte(s[i+1:to], '\''); j >= 0 {
				i += j + 1
			}
		case c == '-' && i+1 < to && s[i+1] == '-':
			if j := strings.IndexByte(s[i:to], '\n'); j >= 0 {
				i += j
			} else {
				i = to
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, [2]int{start, i})
			start = i + 1
		}
	}
	return append(out, [2]int{start, to})
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
