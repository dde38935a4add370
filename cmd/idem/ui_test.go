package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIUsage: idem ui's mistakes are one-line usage errors, exit 2, and
// it never listens beyond loopback unless told.
func TestUIUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short, good := filepath.Join(dir, "short"), filepath.Join(dir, "good")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", db}, "--operators-file is required"},
		{[]string{"--store", db, "--token-file", short}, "at least 16"},
		{[]string{"--store", db, "--token-file", filepath.Join(dir, "none")}, "--token-file"},
		{[]string{"--store", db, "--token-file", good, "--listen", "0.0.0.0:8788"}, "not a loopback address"},
		{[]string{"--store", db, "--token-file", good, "--listen", ":8788"}, "not a loopback address"},
		{[]string{"--store", db, "--token-file", good, "--listen", "nope"}, "--listen"},
		{[]string{"--store", db, "--token-file", good, "--metrics-url", "ftp://x/metrics"}, "--metrics-url"},
		{[]string{"--store", db, "--token-file", good, "extra"}, "unexpected argument"},
		{[]string{"--store", "memory://", "--token-file", good}, "memory://"},
		{[]string{"--bogus"}, "--bogus"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"ui"}, c.args...), &out, &errb)
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		if code != exitUsage || !strings.Contains(lines[0], c.want) || len(lines) != 2 || lines[1] != "Run 'idem ui --help' for usage." {
			t.Errorf("idem ui %v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, errb.String(), c.want)
		}
	}
}
