package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCLI(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

func TestUsageAndExitCodes(t *testing.T) {
	t.Parallel()
	if _, e, code := runCLI(); code != exitUsage || !strings.Contains(e, "usage: idem") {
		t.Fatalf("no args: code %d, stderr %q", code, e)
	}
	if _, e, code := runCLI("bogus"); code != exitUsage || !strings.Contains(e, "unknown command") {
		t.Fatalf("unknown command: code %d, stderr %q", code, e)
	}
	for name := range commands {
		o, _, code := runCLI(name, "--help")
		if code != exitOK || !strings.Contains(o, "example:\n  idem "+name) {
			t.Errorf("%s --help: code %d, stdout %q", name, code, o)
		}
		_, e, code := runCLI(name, "--no-such-flag")
		if code != exitUsage || !strings.Contains(e, "usage: idem "+name) {
			t.Errorf("%s with a bad flag: code %d, stderr %q", name, code, e)
		}
	}
}

func TestFlagsAfterPositionals(t *testing.T) {
	t.Parallel()
	// The key comes first and the flags after it; memory:// is empty, so
	// the command parses and then fails to find the record (exit 1, not 2).
	_, e, code := runCLI("get", "order-42", "--store", "memory://", "--json")
	if code != exitFailure || !strings.Contains(e, `no record for key "order-42"`) {
		t.Fatalf("code %d, stderr %q", code, e)
	}
	// "--" ends the flags: a key that looks like a flag.
	_, e, code = runCLI("get", "--store", "memory://", "--", "--json")
	if code != exitFailure || !strings.Contains(e, `no record for key "--json"`) {
		t.Fatalf("after --: code %d, stderr %q", code, e)
	}
	if _, _, code := runCLI("get", "a", "b", "--store", "memory://"); code != exitUsage {
		t.Fatalf("two keys: code %d, want 2", code)
	}
}

func TestResolveNeedsReasonAndAs(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"resolve", "k", "--store", "memory://", "--as", "released"},
		{"resolve", "k", "--store", "memory://", "--reason", "x"},
		{"resolve", "k", "--store", "memory://", "--reason", "x", "--as", "maybe"},
		{"resolve", "k", "--store", "memory://", "--reason", "x", "--as", "released", "--status", "200"},
	} {
		if _, _, code := runCLI(args...); code != exitUsage {
			t.Errorf("%v: code %d, want 2", args, code)
		}
	}
}

func TestProxyRefusesShortTTL(t *testing.T) {
	t.Parallel()
	_, e, code := runCLI("proxy", "--upstream", "http://127.0.0.1:1", "--store", "memory://",
		"--ttl", "24h", "--cover", "retries=1h", "--cover", "dispute=120d")
	if code != exitUsage || !strings.Contains(e, `"dispute"`) || strings.Contains(e, "listening") {
		t.Fatalf("code %d, stderr %q; want a refusal naming the dispute window", code, e)
	}
}

func TestProxyFlagErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"proxy"},
		{"proxy", "--upstream", "ftp://x"},
		{"proxy", "--upstream", "http://x", "--in-flight", "maybe"},
		{"proxy", "--upstream", "http://x", "--methods", "GET"},
		{"proxy", "--upstream", "http://x", "--release-status", "abc"},
		{"proxy", "--upstream", "http://x", "--store", "mongodb://x"},
		{"proxy", "--upstream", "http://x", "--cover", "nodur"},
	} {
		if _, _, code := runCLI(args...); code != exitUsage {
			t.Errorf("%v: code %d, want 2", args, code)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"30s": "30s", "2d": "48h0m0s", "1d12h": "36h0m0s"} {
		d, err := parseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("parseDuration(%q) = %v, %v", in, d, err)
		}
	}
	for _, in := range []string{"", "x", "-1s", "d", "1dx"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) succeeded", in)
		}
	}
}
