package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionJSON: idem version --json prints versionInfo (docs/cli.md):
// the Go version and platform, and the modules linked in, the main one
// first; the text form says the same.
func TestVersionJSON(t *testing.T) {
	t.Parallel()
	out, errs, code := runCLI("version", "--json")
	var v versionInfo
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Version == "" ||
		len(v.Modules) < 2 || v.Modules[0].Path != "github.com/idemkit/idem/cmd/idem" {
		t.Fatalf("version --json = %+v", v)
	}
	var root bool
	for _, m := range v.Modules {
		root = root || m.Path == "github.com/idemkit/idem"
	}
	if !root {
		t.Errorf("the core module is not among %+v", v.Modules)
	}
	text, _, _ := runCLI("version")
	if !strings.HasPrefix(text, "idem "+v.Version+"\n") || !strings.Contains(text, v.GoVersion+" "+v.Platform) {
		t.Errorf("version:\n%s", text)
	}
}

// TestBuildStampsCommit: a binary built by scripts/build names the commit
// it was built from, whatever GOFLAGS and the checkout (a worktree, or
// -buildvcs=false, give go build no revision of its own).
func TestBuildStampsCommit(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "idem")
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "build"), "-o", bin)
	cmd.Env = append(cmd.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	var v versionInfo
	if err != nil || json.Unmarshal(out, &v) != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if v.Commit != strings.TrimSpace(string(head)) || v.CommitTime == "" {
		t.Fatalf("commit %q at %q, want %s", v.Commit, v.CommitTime, head)
	}
	text, _ := exec.Command(bin, "version").Output()
	if !strings.Contains(string(text), "commit "+v.Commit) {
		t.Fatalf("version:\n%s", text)
	}
}
