package mutation

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Mutation is one guard mutation: an edit that removes or breaks one guard,
// and the tests that must notice.
type Mutation struct {
	// ID names the mutation; unique across the lists run together.
	ID string
	// Item is the checklist item the mutation attacks (replay, crash,
	// divergence, concurrency, constraint, fencing, retention,
	// observability, scope, or an adapter's own).
	Item string
	// What says what the edit breaks.
	What string
	// File is the file edited, slash-separated, relative to the tree's root.
	File string
	// Find is the text replaced; it must occur in File exactly once.
	Find string
	// Replace is the text put in its place (empty: Find is deleted).
	Replace string
	// Packages are the go test patterns, relative to the root, whose tests
	// must kill the mutation.
	Packages []string
	// Run is the -run pattern, or empty for every test of the packages.
	Run string
	// Timeout bounds the tests' run (go test -timeout); zero takes
	// [Config].Timeout.
	Timeout time.Duration
	// Env holds KEY=VALUE pairs added to go test's environment.
	Env []string
	// Source is where the entry starts: "file:line".
	Source string
}

// Items are the checklist items, in the order reports list them; other
// items (an adapter's own) follow in alphabetical order.
var Items = []string{"replay", "crash", "divergence", "concurrency", "constraint", "fencing", "retention", "observability", "scope"}

// Parse reads the entries of a list (see the package documentation for the
// format). source names the list in errors and in each Mutation's Source.
func Parse(r io.Reader, source string) ([]Mutation, error) {
	var (
		out   []Mutation
		cur   *Mutation
		seen  map[string]bool // fields set in cur
		field string          // the multi-line field being read
		lines []string
		start int // line of cur's id
	)
	bad := func(n int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", source, n, fmt.Sprintf(format, args...))
	}
	flush := func() {
		if field != "" {
			setField(cur, field, strings.Join(lines, "\n"))
			field, lines = "", nil
		}
	}
	end := func() error {
		if cur == nil {
			return nil
		}
		flush()
		for _, f := range []string{"item", "file", "find", "replace", "packages"} {
			if !seen[f] {
				return bad(start, "mutation %q has no %s", cur.ID, f)
			}
		}
		if cur.Find == "" {
			return bad(start, "mutation %q: find is empty", cur.ID)
		}
		if cur.Find == cur.Replace {
			return bad(start, "mutation %q: replace is the same as find", cur.ID)
		}
		out = append(out, *cur)
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "|") {
			if field == "" {
				return nil, bad(n, "a \"|\" line outside a multi-line field")
			}
			lines = append(lines, line[1:])
			continue
		}
		flush()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, bad(n, "want \"name: value\", got %q", line)
		}
		name = strings.TrimSpace(name)
		value = strings.TrimPrefix(value, " ")
		if name == "id" {
			if err := end(); err != nil {
				return nil, err
			}
			id := strings.TrimSpace(value)
			if id == "" || strings.ContainsAny(id, " \t") {
				return nil, bad(n, "an id is one word, got %q", value)
			}
			cur, seen, start = &Mutation{ID: id, Source: fmt.Sprintf("%s:%d", source, n)}, map[string]bool{}, n
			continue
		}
		if cur == nil {
			return nil, bad(n, "field %q before the first id", name)
		}
		if !knownField(name) {
			return nil, bad(n, "unknown field %q", name)
		}
		if seen[name] {
			return nil, bad(n, "mutation %q: %s given twice", cur.ID, name)
		}
		seen[name] = true
		if value == "" && multiLine(name) {
			field = name
			continue
		}
		if err := setValue(cur, name, value); err != nil {
			return nil, bad(n, "mutation %q: %v", cur.ID, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if err := end(); err != nil {
		return nil, err
	}
	return out, nil
}

func knownField(name string) bool {
	switch name {
	case "item", "what", "file", "find", "replace", "packages", "run", "timeout", "env":
		return true
	}
	return false
}

// multiLine reports whether a field may span "|" lines.
func multiLine(name string) bool { return name == "find" || name == "replace" || name == "what" }

// setField sets a multi-line field's value.
func setField(m *Mutation, name, value string) {
	switch name {
	case "find":
		m.Find = value
	case "replace":
		m.Replace = value
	case "what":
		m.What = value
	}
}

// setValue sets a one-line field's value.
func setValue(m *Mutation, name, value string) error {
	switch name {
	case "find", "replace", "what":
		setField(m, name, value)
	case "item":
		m.Item = strings.TrimSpace(value)
		if m.Item == "" {
			return errors.New("item is empty")
		}
	case "file":
		m.File = strings.TrimSpace(value)
		if m.File == "" || path.IsAbs(m.File) || strings.Contains(m.File, `\`) || path.Clean(m.File) != m.File || strings.HasPrefix(m.File, "../") {
			return fmt.Errorf("file must be a clean slash-separated path inside the tree, got %q", value)
		}
	case "packages":
		m.Packages = strings.Fields(value)
		if len(m.Packages) == 0 {
			return errors.New("packages is empty")
		}
	case "run":
		m.Run = strings.TrimSpace(value)
	case "timeout":
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout: want a positive duration, got %q", value)
		}
		m.Timeout = d
	case "env":
		for _, kv := range strings.Fields(value) {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return fmt.Errorf("env: want KEY=VALUE, got %q", kv)
			}
			m.Env = append(m.Env, kv)
		}
	}
	return nil
}

// Load reads lists from paths: files, or directories whose *.txt files are
// read in name order. Ids must be unique across them.
func Load(paths ...string) ([]Mutation, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.txt"))
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no *.txt list in the directory", p)
		}
		files = append(files, m...)
	}
	var out []Mutation
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ms, err := Parse(strings.NewReader(string(b)), filepath.ToSlash(f))
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if prev, ok := ids[m.ID]; ok {
				return nil, fmt.Errorf("%s: id %q already used at %s", m.Source, m.ID, prev)
			}
			ids[m.ID] = m.Source
		}
		out = append(out, ms...)
	}
	return out, nil
}

// Apply returns src with m's edit made, or an error when m.Find does not
// occur in src exactly once.
func Apply(src []byte, m Mutation) ([]byte, error) {
	s := string(src)
	switch n := strings.Count(s, m.Find); n {
	case 1:
		return []byte(strings.Replace(s, m.Find, m.Replace, 1)), nil
	case 0:
		return nil, fmt.Errorf("the text to find is not in %s", m.File)
	default:
		return nil, fmt.Errorf("the text to find occurs %d times in %s, want once", n, m.File)
	}
}

// Shard returns the mutations of shard i of n (0 <= i < n): those whose id
// hashes to i modulo n. The n shards partition the list, and a mutation
// stays in its shard as others are added or removed, so running shard k
// mod n on the k-th run covers every mutation once every n runs.
func Shard(muts []Mutation, i, n int) []Mutation {
	if n <= 1 {
		return muts
	}
	var out []Mutation
	for _, m := range muts {
		if int(fnv32(m.ID)%uint32(n)) == i {
			out = append(out, m)
		}
	}
	return out
}

// fnv32 is FNV-1a: stable across Go versions and platforms.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
