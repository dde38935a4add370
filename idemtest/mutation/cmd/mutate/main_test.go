package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	for s, want := range map[string][2]int{"0/1": {0, 1}, "2/4": {2, 4}} {
		i, n, err := parseShard(s)
		if err != nil || i != want[0] || n != want[1] {
			t.Errorf("parseShard(%q) = %d, %d, %v", s, i, n, err)
		}
	}
	for _, s := range []string{"", "1", "4/4", "-1/3", "a/b", "1/0"} {
		if _, _, err := parseShard(s); err == nil {
			t.Errorf("parseShard(%q) accepted", s)
		}
	}
}

// TestCheckAndList: -check reports an edit that no longer applies (exit 3)
// and -list prints a shard's mutations; the repository's own list applies
// to the tree as it is.
func TestCheckAndList(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nfunc F() int { return 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, "list.txt")
	if err := os.WriteFile(list, []byte("id: a/one\nitem: replay\nfile: a.go\nfind: return 1\nreplace: return 2\npackages: .\n\n"+
		"id: a/gone\nitem: scope\nfile: a.go\nfind: return 3\nreplace: return 4\npackages: .\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-root", dir, "-check", list}, &out, &errb); code != exitFound ||
		!strings.Contains(out.String(), "invalid a/gone") || strings.Contains(out.String(), "invalid a/one") {
		t.Fatalf("-check: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"-root", dir, "-list", "-item", "replay", list}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "a/one") || strings.Contains(out.String(), "a/gone") {
		t.Fatalf("-list -item replay: exit %d\n%s", code, out.String())
	}
	if code := run(context.Background(), []string{"-shard", "5/2", list}, &out, &errb); code != exitUsage {
		t.Fatalf("-shard 5/2: exit %d, want usage", code)
	}
	out.Reset()
	root := filepath.Join("..", "..", "..", "..")
	if code := run(context.Background(), []string{"-root", root, "-check"}, &out, &errb); code != exitOK {
		t.Fatalf("the repository's list does not apply to the tree (exit %d):\n%s%s", code, out.String(), errb.String())
	}
}
