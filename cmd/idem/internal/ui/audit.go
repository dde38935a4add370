package ui

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"
)

// AuditEntry is one decision taken through the dashboard, as the audit
// log keeps it: one JSON object a line, each naming the hash of the line
// before it (Prev), so that a line edited, removed or inserted anywhere
// but after the last one breaks the chain ([VerifyAuditLog]).
type AuditEntry struct {
	// Seq is the line's number in the log, from 1.
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Operator is who decided: an operators file's name, verified by
	// their password, or with the shared token "token:NAME", where NAME
	// is what was typed at login and nothing verified it.
	Operator string `json:"operator"`
	// Role is the operator's role when they decided.
	Role  string `json:"role,omitempty"`
	Scope string `json:"scope"`
	Key   string `json:"key"`
	// Decision is succeeded, failed or released.
	Decision    string `json:"decision"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Result is the SHA-256 (hex) of the result recorded, exactly as
	// retries replay it; empty when released.
	Result string `json:"result_sha256,omitempty"`
	Reason string `json:"reason"`
	// FromFence is the record's fence when decided; ToFence the fence of
	// the decided record (0 when released).
	FromFence int64  `json:"from_fence"`
	ToFence   int64  `json:"to_fence,omitempty"`
	Remote    string `json:"remote,omitempty"`
	// Prev is the SHA-256 (hex) of the previous line as written, without
	// its newline; empty on the first line.
	Prev string `json:"prev"`
}

// lineHash is the hash the next line's Prev names.
func lineHash(line []byte) string {
	h := sha256.Sum256(line)
	return hex.EncodeToString(h[:])
}

// auditLog appends entries to a file and reads a record's back. Appends
// are fsync'd: the trail must outlive a crash of the dashboard. Each
// append reads the file's last line for its number and hash, so the
// chain stays whole across restarts; one dashboard process appends to a
// log at a time.
type auditLog struct {
	path string
	mu   sync.Mutex
	// head is the hash of the line this process appended last.
	head string
}

// ErrAuditLog: the audit log cannot be extended (its last line is not a
// whole entry of the chain), so no decision is taken.
var ErrAuditLog = errors.New("ui: audit log not appendable")

// tail returns the number and hash of f's last line; 0 and "" for an
// empty file. A file that does not end in a newline ends in a partial
// line (a cut write, or a cut file) and is refused.
func tail(f *os.File) (seq int64, hash string, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	size := fi.Size()
	if size == 0 {
		return 0, "", nil
	}
	// Read back from the end until the line before the last newline is
	// whole.
	chunk := int64(4096)
	for {
		n := min(chunk, size)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, size-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, "", err
		}
		if buf[len(buf)-1] != '\n' {
			return 0, "", fmt.Errorf("%w: %s ends in a partial line (cut off); run idem ui verify-log on it", ErrAuditLog, f.Name())
		}
		body := buf[:len(buf)-1]
		i := bytes.LastIndexByte(body, '\n')
		if i < 0 && n < size {
			chunk *= 4
			continue
		}
		last := body[i+1:]
		var e struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(last, &e); err != nil || e.Seq <= 0 {
			return 0, "", fmt.Errorf("%w: the last line of %s is not an entry of the chain; run idem ui verify-log on it", ErrAuditLog, f.Name())
		}
		return e.Seq, lineHash(last), nil
	}
}

// ready reports whether the log can take an entry now: it can be opened
// for appending and its last line is whole. A decision is taken only when
// it can be logged.
func (a *auditLog) ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuditLog, err)
	}
	defer f.Close()
	_, _, err = tail(f)
	return err
}

// append writes e as the log's next line, chained to the last one (Seq
// and Prev are set here), and keeps the new line's hash as the log's head
// (lastHead), which a copy kept elsewhere lets verify-log detect lines cut
// from the end.
func (a *auditLog) append(e AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	seq, prev, err := tail(f)
	if err != nil {
		return err
	}
	e.Seq, e.Prev = seq+1, prev
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	a.head = lineHash(b)
	return f.Close()
}

// lastHead is the hash of the line this process appended last.
func (a *auditLog) lastHead() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.head
}

// forRecord returns the entries for (scope, key), oldest first. A log
// that does not exist yet holds none.
func (a *auditLog) forRecord(scope, key string) ([]AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxAuditLine)
	for sc.Scan() {
		var e AuditEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Scope == scope && e.Key == key {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// maxAuditLine bounds one line of the log (a reason is at most a form's
// size).
const maxAuditLine = 4 << 20

// LogReport is what [VerifyAuditLog] found.
type LogReport struct {
	// Lines is the number of lines read.
	Lines int64 `json:"lines"`
	// Intact is true when every line is a whole entry chained to the one
	// before it (and Anchor, when given, is one of them).
	Intact bool `json:"intact"`
	// Head is the hash of the last intact line: give it to a later
	// verification as the anchor to detect lines cut from the end.
	Head string `json:"head,omitempty"`
	// BrokenLine is the first line that breaks the chain (1-based); 0 when
	// intact. A line edited in place shows as the line after it, whose
	// Prev no longer matches; a missing anchor as the line after the last.
	BrokenLine int64 `json:"broken_line,omitempty"`
	// Problem says what is wrong at BrokenLine.
	Problem string `json:"problem,omitempty"`
}

// VerifyAuditLog reads an audit log and checks its chain: every line a
// JSON entry ending in a newline, numbered in order from 1, whose Prev is
// the hash of the line before it (empty for the first). It detects a
// line edited, removed or inserted, a log cut in the middle of a line,
// and lines put before the first. The chain alone cannot tell lines cut
// from the end: anchor, when not empty, is a head reported earlier (the
// dashboard logs the head after each decision), and the log is intact
// only if one of its lines has that hash. The error is for a log that
// cannot be read at all.
func VerifyAuditLog(r io.Reader, anchor string) (LogReport, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var rep LogReport
	prev := ""
	anchored := anchor == ""
	broken := func(line int64, format string, a ...any) (LogReport, error) {
		rep.BrokenLine, rep.Problem, rep.Intact = line, fmt.Sprintf(format, a...), false
		return rep, nil
	}
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errLongLine) {
			return rep, err
		}
		n := rep.Lines + 1
		rep.Lines = n
		switch {
		case errors.Is(err, errLongLine):
			return broken(n, "line longer than %d bytes: not an entry", maxAuditLine)
		case errors.Is(err, io.EOF):
			return broken(n, "the last line has no newline: the log was cut in the middle of a line")
		}
		body := line[:len(line)-1]
		var e AuditEntry
		if err := json.Unmarshal(body, &e); err != nil {
			return broken(n, "not a JSON entry (%v)", err)
		}
		if e.Seq != n {
			return broken(n, "numbered %d, want %d: a line was removed or inserted before it", e.Seq, n)
		}
		if e.Prev != prev {
			if n == 1 {
				return broken(n, "the first line names a previous line: the log's beginning was removed")
			}
			return broken(n, "prev does not match the hash of line %d: line %d was edited, or lines were removed or inserted between them", n-1, n-1)
		}
		prev = lineHash(body)
		if prev == anchor {
			anchored = true
		}
		rep.Head = prev
	}
	if !anchored {
		return broken(rep.Lines+1, "no line has the anchor's hash %s: lines were cut from the end (or the log was rewritten)", strconv.Quote(anchor))
	}
	rep.Intact = true
	return rep, nil
}

var errLongLine = errors.New("line too long")

// readLine reads one line with its newline; io.EOF with a partial line
// that has none.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxAuditLine {
			return out, errLongLine
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

// check verifies the whole log before the dashboard appends to it: a
// log whose chain is broken is evidence to keep, not to extend.
func (a *auditLog) check() error {
	f, err := os.Open(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := VerifyAuditLog(f, "")
	if err != nil {
		return fmt.Errorf("audit log %s: %w", a.path, err)
	}
	if !rep.Intact {
		return fmt.Errorf("%w: %s is broken at line %d (%s): keep it as evidence, start a new one with another --audit-log, and see idem ui verify-log",
			ErrAuditLog, a.path, rep.BrokenLine, rep.Problem)
	}
	return nil
}
