package main

import (
	"context"
	"strings"
	"testing"
)

// The audit itself is tested in idemmcp/audit; this checks the wiring.
func TestToolsAuditIsWired(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"tools-audit", "--help"}, &out, &errb); code != exitOK {
		t.Fatalf("tools-audit --help exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String()+errb.String(), "tools-audit") {
		t.Fatalf("help does not describe the command: %q", out.String()+errb.String())
	}
	if code := run(context.Background(), []string{"tools-audit"}, &out, &errb); code != exitUsage {
		t.Fatalf("tools-audit without a server: exit %d, want %d", code, exitUsage)
	}
}
