package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// passwd runs idem ui passwd with password on standard input (a pipe).
func passwd(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(idemBin, append([]string{"ui", "passwd"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// TestUIPasswd: the line printed for a password read from a pipe holds a
// bcrypt hash of exactly that password (without its newline) and the
// role; bad names, roles and passwords are usage errors.
func TestUIPasswd(t *testing.T) {
	t.Parallel()
	out, errOut, code := passwd(t, "correct horse battery\n", "alice", "--role", "viewer")
	if code != 0 {
		t.Fatalf("passwd: %d %s", code, errOut)
	}
	parts := strings.Split(strings.TrimSpace(out), ":")
	if len(parts) != 3 || parts[0] != "alice" || parts[2] != "viewer" {
		t.Fatalf("passwd printed %q", out)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(parts[1]), []byte("correct horse battery")); err != nil {
		t.Fatalf("the hash is not of the password given: %v", err)
	}
	if c, _ := bcrypt.Cost([]byte(parts[1])); c < 12 {
		t.Fatalf("bcrypt cost %d, want at least 12", c)
	}
	out, _, code = passwd(t, "another-password", "bob", "--json") // no newline: end of input ends it
	var j struct{ Operator, Role, Line string }
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.Operator != "bob" || j.Role != "decider" || !strings.HasPrefix(j.Line, "bob:$2") {
		t.Fatalf("passwd --json: %d %s", code, out)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"password-1\n", nil, "give one operator NAME"},
		{"password-1\n", []string{"al:ice"}, "operator name"},
		{"password-1\n", []string{"alice", "--role", "admin"}, "--role"},
		{"short\n", []string{"alice"}, "8 to 72 bytes"},
		{"", []string{"alice"}, "no password"},
	} {
		if _, errOut, code := passwd(t, c.stdin, c.args...); code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("passwd %v: %d %q, want a usage error naming %q", c.args, code, errOut, c.want)
		}
	}
}

// TestUIOperatorsFileChecks: an operators file other users may read is
// refused as a token file is, and the two modes exclude each other.
func TestUIOperatorsFileChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line, _, code := passwd(t, "alice-password\n", "alice")
	if code != 0 {
		t.Fatal("passwd failed")
	}
	ops, token := filepath.Join(dir, "operators"), filepath.Join(dir, "token")
	if err := os.WriteFile(ops, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("alice:plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--operators-file", ops}, "accessible to other users"},
		{[]string{"--operators-file", bad}, "not a bcrypt hash"},
		{[]string{"--operators-file", ops, "--token-file", token}, "exclude each other"},
		{[]string{"--operators-file", ops, "--operator", "bob"}, "--operator applies to --token-file only"},
	} {
		_, errOut, code := cli(t, append([]string{"ui", "--store", db}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("idem ui %v: %d %q, want exit 2 naming %q", c.args, code, errOut, c.want)
		}
	}
	if strings.Contains(func() string { _, e, _ := cli(t, "ui", "--store", db, "--operators-file", ops); return e }(), "$2") {
		t.Error("a refusal shows the hash")
	}
}

// TestUIVerifyLog: verify-log exits 0 on an intact chain and 3 naming
// the first broken line, in text and JSON.
func TestUIVerifyLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A chain as the dashboard writes it: seq, prev = sha256 of the line before.
	var lines []string
	prev := ""
	for i := 1; i <= 4; i++ {
		b, _ := json.Marshal(map[string]any{"seq": i, "operator": "alice", "decision": "released", "reason": "r", "key": "k", "prev": prev})
		lines = append(lines, string(b)+"\n")
		prev = sha256hex(b)
	}
	good, edited := filepath.Join(dir, "good.jsonl"), filepath.Join(dir, "edited.jsonl")
	if err := os.WriteFile(good, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(edited, []byte(lines[0]+strings.Replace(lines[1], `"alice"`, `"mallory"`, 1)+lines[2]+lines[3]), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "ui", "verify-log", good)
	if code != 0 || !strings.Contains(out, "intact, 4 lines, head "+prev) {
		t.Fatalf("verify-log good: %d %s%s", code, out, errOut)
	}
	out, _, code = cli(t, "ui", "verify-log", edited)
	if code != exitFindings || !strings.Contains(out, "broken at line 3") {
		t.Fatalf("verify-log edited: %d %s", code, out)
	}
	out, _, code = cli(t, "ui", "verify-log", "--json", edited)
	var rep struct {
		File       string `json:"file"`
		Intact     bool   `json:"intact"`
		BrokenLine int    `json:"broken_line"`
		Problem    string `json:"problem"`
	}
	if code != exitFindings || json.Unmarshal([]byte(out), &rep) != nil || rep.Intact || rep.BrokenLine != 3 || rep.File != edited || rep.Problem == "" {
		t.Fatalf("verify-log --json edited: %d %s", code, out)
	}
	// Cut from the end: whole without an anchor, broken with one.
	cut := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cut, []byte(lines[0]+lines[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, code := cli(t, "ui", "verify-log", cut); code != 0 {
		t.Fatalf("verify-log cut without anchor: %d", code)
	}
	if out, _, code := cli(t, "ui", "verify-log", cut, "--anchor", prev); code != exitFindings || !strings.Contains(out, "broken at line 3") {
		t.Fatalf("verify-log cut with the anchor: %d %s", code, out)
	}
	if _, errOut, code := cli(t, "ui", "verify-log", filepath.Join(dir, "none")); code != exitFailure || errOut == "" {
		t.Fatalf("verify-log of no file: %d", code)
	}
	if _, _, code := cli(t, "ui", "verify-log"); code != exitUsage {
		t.Fatalf("verify-log without a file: %d", code)
	}
}

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
