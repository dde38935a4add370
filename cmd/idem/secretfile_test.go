package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecretFilesRefusedWhenOthersCanReadThem: --token-file and
// --digest-secret-file are refused, as --encryption-key-file is, when
// other users can read or write them; 0600 is accepted.
func TestSecretFilesRefusedWhenOthersCanReadThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o602, 0o604} {
		if err := os.Chmod(secret, mode); err != nil {
			t.Fatal(err)
		}
		out, errs, code := runCLIWithin(10*time.Second, "ui", "--store", "memory://", "--token-file", secret, "--listen", "127.0.0.1:0")
		if code != exitUsage || !strings.Contains(errs, "accessible to other users") {
			t.Errorf("ui --token-file mode %v: exit %d, want 2 naming the mode\n%s%s", mode, code, out, errs)
		}
		out, errs, code = runCLIWithin(10*time.Second, "proxy", "--global-scope", "--upstream", "http://127.0.0.1:1", "--store", "memory://",
			"--digest-secret-file", secret, "--spool", "", "--listen", "127.0.0.1:0")
		if code == exitOK || !strings.Contains(errs, "accessible to other users") {
			t.Errorf("proxy --digest-secret-file mode %v: exit %d, want a refusal naming the mode\n%s%s", mode, code, out, errs)
		}
	}
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSecretFile(secret); err != nil {
		t.Fatalf("a 0600 secret file: %v", err)
	}
}
