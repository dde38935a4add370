package main

import (
	"bytes"
	"context"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func runCLI(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

// runCLIWithin runs a command that should refuse to start: if it starts
// serving instead, it is stopped after d, so the test fails on its exit
// code rather than hanging.
func runCLIWithin(d time.Duration, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code = run(ctx, args, &o, &e)
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
		want := "idem " + name + ": flag provided but not defined: --no-such-flag\nRun 'idem " + name + " --help' for usage.\n"
		if code != exitUsage || e != want {
			t.Errorf("%s with a bad flag: code %d, stderr %q; want %q", name, code, e, want)
		}
		if regexp.MustCompile(`\n  -[a-z]`).MatchString(o) {
			t.Errorf("%s --help shows a flag in -flag form; the CLI documents --flag:\n%s", name, o)
		}
	}
}

func TestFlagsAfterPositionals(t *testing.T) {
	t.Parallel()
	dsn := seedRecord(t, "paid-1", nil)
	// The key comes first and the flags after it; the store has no such
	// record, so the command parses and then fails to find it (exit 1, not 2).
	_, e, code := runCLI("get", "order-42", "--store", dsn, "--json")
	if code != exitFailure || !strings.Contains(e, `no record for key "order-42"`) {
		t.Fatalf("code %d, stderr %q", code, e)
	}
	// "--" ends the flags: a key that looks like a flag.
	_, e, code = runCLI("get", "--store", dsn, "--", "--json")
	if code != exitFailure || !strings.Contains(e, `no record for key "--json"`) {
		t.Fatalf("after --: code %d, stderr %q", code, e)
	}
	if _, _, code := runCLI("get", "a", "b", "--store", dsn); code != exitUsage {
		t.Fatalf("two keys: code %d, want 2", code)
	}
}

// TestKeyArgumentsAcceptTheHeaderForm: a key copied from an
// Idempotency-Key header, quotes and all, finds its record.
func TestKeyArgumentsAcceptTheHeaderForm(t *testing.T) {
	t.Parallel()
	dsn := seedRecord(t, "order-42", []byte("ok"))
	for _, arg := range []string{"order-42", `"order-42"`} {
		if o, e, code := runCLI("get", arg, "--store", dsn); code != exitOK || !strings.Contains(o, "order-42") {
			t.Errorf("get %s: code %d, stdout %q, stderr %q", arg, code, o, e)
		}
	}
	if _, e, code := runCLI("get", `"unterminated`, "--store", dsn); code != exitFailure || !strings.Contains(e, "no record") {
		t.Errorf(`get "unterminated: code %d, stderr %q; want the key looked up as written`, code, e)
	}
}

// TestRecordCommandsRefuseMemoryStore: memory:// starts empty in every
// process, so reading records from it would show an empty store.
func TestRecordCommandsRefuseMemoryStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"get", "k", "--store", "memory://"},
		{"list", "--store", "memory://"},
		{"resolve", "k", "--store", "memory://", "--as", "released", "--reason", "x"},
		{"sweep", "--store", "memory://"},
	} {
		if _, e, code := runCLI(args...); code != exitUsage || !strings.Contains(e, "memory:// starts empty") {
			t.Errorf("%v: code %d, stderr %q; want 2 naming memory://", args, code, e)
		}
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
	_, e, code := runCLI("proxy", "--global-scope", "--upstream", "http://127.0.0.1:1", "--store", "memory://",
		"--ttl", "24h", "--cover", "retries=1h", "--cover", "dispute=120d")
	if code != exitUsage || !strings.Contains(e, `"dispute"`) || strings.Contains(e, "listening") {
		t.Fatalf("code %d, stderr %q; want a refusal naming the dispute window", code, e)
	}
}

func TestProxyFlagErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"proxy"},
		{"proxy", "--global-scope", "--upstream", "ftp://x"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--in-flight", "maybe"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--methods", "GET"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--release-status", "abc"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--store", "mongodb://x"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--cover", "nodur"},
		{"proxy", "--global-scope", "--upstream", "http://x", "--upstream-timeout", "-1s"},
	} {
		if _, _, code := runCLI(args...); code != exitUsage {
			t.Errorf("%v: code %d, want 2", args, code)
		}
	}
}

// TestProxyRefusesBadFlagValues: values that would start a proxy that
// refuses every request, or releases applied ones, are usage errors that
// say why.
func TestProxyRefusesBadFlagValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scope-header", "bad header"}, `--scope-header: "bad header" is not a header field name`},
		{[]string{"--scope-header", "X-Tenant:"}, `is not a header field name`},
		{[]string{"--methods", "PO ST"}, `--methods: "PO ST" is not an HTTP method`},
		{[]string{"--methods", "POST,PUT(x)"}, `is not an HTTP method`},
		{[]string{"--release-status", "429,200"}, `--release-status: 200 means the upstream applied the request`},
		{[]string{"--release-status", "301"}, `releasing its key would let a retry apply it again`},
	} {
		e, code := runProxyBriefly(c.args...)
		if code != exitUsage || !strings.Contains(e, c.want) || strings.Contains(e, "listening") {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q", c.args, code, e, c.want)
		}
	}
}

// TestDurationOverflowIsAUsageError: a day count past time.Duration's range
// used to wrap (213504d became about 25m).
func TestDurationOverflowIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--ttl", "213504d"},
		{"--ttl", "200000d"},
		{"--cover", "x=99999999999999999999d"},
	} {
		e, code := runProxyBriefly(args...)
		if code != exitUsage || !strings.Contains(e, "is too long") {
			t.Errorf("proxy %v: code %d, stderr %q; want 2 and a duration that is too long", args, code, e)
		}
	}
	_, e, code := runCLI("list", "--store", "memory://", "--older-than", "200000d")
	if code != exitUsage || !strings.Contains(e, "is too long") {
		t.Errorf("list --older-than 200000d: code %d, stderr %q; want 2 and a duration that is too long", code, e)
	}
}

// runProxyBriefly runs the proxy in process with args, for tests of flags
// it must refuse: should it start instead, it is stopped after a few
// seconds (exit 0) rather than serving until the test times out.
func runProxyBriefly(args ...string) (stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	args = append([]string{"proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:1", "--store", "memory://", "--spool", ""}, args...)
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--scope-header" || a == "--scope-jwt" || a == "--global-scope" }) {
		args = append(args, "--global-scope") // the tests here are about other flags
	}
	code = run(ctx, args, &o, &e)
	return e.String(), code
}

// TestSynopsisListsEveryFlag: each command's usage line names all of its
// flags. (migrate is left to its own tests.)
func TestSynopsisListsEveryFlag(t *testing.T) {
	t.Parallel()
	flagRE := regexp.MustCompile(`(?m)^  --(\S+)`)
	for _, name := range []string{"proxy", "get", "list", "resolve", "sweep", "audit"} {
		o, _, _ := runCLI(name, "--help")
		synopsis, _, _ := strings.Cut(o, "\n")
		for _, m := range flagRE.FindAllStringSubmatch(o, -1) {
			if !strings.Contains(synopsis, "--"+m[1]+" ") && !strings.Contains(synopsis, "--"+m[1]+"]") &&
				!strings.Contains(synopsis, "--"+m[1]+"=") {
				t.Errorf("%s: synopsis %q lacks --%s", name, synopsis, m[1])
			}
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
	for in, want := range map[string]string{"106751d": "2562024h0m0s", "106751d23h": "2562047h0m0s"} {
		d, err := parseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("parseDuration(%q) = %v, %v", in, d, err)
		}
	}
	for _, in := range []string{"", "x", "-1s", "d", "1dx", "106752d", "213504d", "200000d", "106751d24h",
		"99999999999999999999d", "-99999999999999999999d"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) succeeded", in)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		o, e, code := runCLI(args...)
		if code != exitOK || !strings.HasPrefix(o, "idem ") || !strings.Contains(o, runtime.Version()) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want the module and Go versions", args, code, o, e)
		}
	}
}
