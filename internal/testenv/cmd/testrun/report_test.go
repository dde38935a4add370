package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// run feeds go test -json output through a report and returns what it
// printed and its exit status.
func run(t *testing.T, events []byte, allowSkip bool) (string, int) {
	t.Helper()
	var out bytes.Buffer
	r := newReport(&out, "github.com/idemkit/idem", []string{".", "pgstore", "internal/testenv"})
	r.allowSkip = allowSkip
	sc := bufio.NewScanner(bytes.NewReader(events))
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	code := r.finish()
	return out.String(), code
}

// goTestJSON runs go test -json on the fixture package, as scripts/test
// runs it on the repository, so the report is tested against the events
// the installed go writes rather than a copy of them.
func goTestJSON(t *testing.T, fail bool) []byte {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command: %v", err)
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", "./testdata/fixture")
	cmd.Env = append(os.Environ(), "TESTRUN_FIXTURE_FAIL=0")
	if fail {
		cmd.Env = append(cmd.Env, "TESTRUN_FIXTURE_FAIL=1")
	}
	out, err := cmd.Output()
	if err != nil && !fail {
		t.Fatalf("go test -json on the fixture: %v\n%s", err, out)
	}
	return out
}

func TestBackendSkipFailsTheRun(t *testing.T) {
	out, code := run(t, goTestJSON(t, false), false)
	if code != 1 {
		t.Errorf("exit %d with a backend skipped, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"SKIPPED BACKENDS (1 tests; fails the run; IDEM_ALLOW_SKIP=1 allows it)",
		"PostgreSQL unavailable (connection refused); set IDEM_TEST_POSTGRES to run this test",
		"fixture.TestBackendSkipped",
		"skipped by design (1 tests; not a failure)",
		"allocation counts differ under the race detector",
		"result: FAIL (backends skipped)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "skipped backends: none") {
		t.Errorf("report says no backend was skipped:\n%s", out)
	}
}

func TestAllowSkipPassesAndStillLists(t *testing.T) {
	out, code := run(t, goTestJSON(t, false), true)
	if code != 0 {
		t.Errorf("exit %d with IDEM_ALLOW_SKIP=1, want 0\n%s", code, out)
	}
	for _, want := range []string{"allowed by IDEM_ALLOW_SKIP=1", "fixture.TestBackendSkipped", "result: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestFailurePrintsTheFailingTest(t *testing.T) {
	out, code := run(t, goTestJSON(t, true), true)
	if code != 1 {
		t.Errorf("exit %d with a failing test, want 1\n%s", code, out)
	}
	for _, want := range []string{"FAIL  internal/testenv/cmd/testrun/testdata/fixture", "TestFails/inner", "the effect ran twice",
		"result: FAIL (internal/testenv/cmd/testrun/testdata/fixture.TestFails/inner)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The failure's output follows the skip lists, so that the tail of a
	// long log (all CI shows of it) holds it.
	if f, s := strings.LastIndex(out, "the effect ran twice"), strings.Index(out, "SKIPPED BACKENDS"); s < 0 || f < s {
		t.Errorf("the failure's output (at %d) comes before the skip lists (at %d):\n%s", f, s, out)
	}
}

func TestDesignSkipsAloneDoNotFail(t *testing.T) {
	events := `{"Action":"start","Package":"github.com/idemkit/idem"}
{"Action":"run","Package":"github.com/idemkit/idem","Test":"TestEngineAllocations"}
{"Action":"output","Package":"github.com/idemkit/idem","Test":"TestEngineAllocations","Output":"=== RUN   TestEngineAllocations\n"}
{"Action":"output","Package":"github.com/idemkit/idem","Test":"TestEngineAllocations","Output":"    allocs_test.go:20: allocation counts differ under the race detector\n"}
{"Action":"output","Package":"github.com/idemkit/idem","Test":"TestEngineAllocations","Output":"--- SKIP: TestEngineAllocations (0.00s)\n"}
{"Action":"skip","Package":"github.com/idemkit/idem","Test":"TestEngineAllocations"}
{"Action":"pass","Package":"github.com/idemkit/idem","Elapsed":3.2}
{"Action":"start","Package":"github.com/idemkit/idem/pgstore/internal/x"}
{"Action":"pass","Package":"github.com/idemkit/idem/pgstore/internal/x","Elapsed":1}
`
	out, code := run(t, []byte(events), false)
	if code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, out)
	}
	for _, want := range []string{"ok    idem ", "module .: 1", "module pgstore: 1", "skipped backends: none", "result: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestUnfinishedPackageFails(t *testing.T) {
	events := `{"Action":"start","Package":"github.com/idemkit/idem/pgstore"}
{"Action":"run","Package":"github.com/idemkit/idem/pgstore","Test":"TestSlow"}
`
	out, code := run(t, []byte(events), false)
	if code != 1 || !strings.Contains(out, "unfinished (go test stopped before they ended): pgstore") {
		t.Errorf("exit %d, want 1 naming pgstore as unfinished\n%s", code, out)
	}
}

func TestBuildFailureFails(t *testing.T) {
	events := `{"ImportPath":"github.com/idemkit/idem/pgstore [github.com/idemkit/idem/pgstore.test]","Action":"build-output","Output":"pgstore/store.go:1:1: expected 'package'\n"}
{"ImportPath":"github.com/idemkit/idem/pgstore [github.com/idemkit/idem/pgstore.test]","Action":"build-fail"}
{"Action":"start","Package":"github.com/idemkit/idem/pgstore"}
{"Action":"output","Package":"github.com/idemkit/idem/pgstore","Output":"FAIL\tgithub.com/idemkit/idem/pgstore [build failed]\n"}
{"Action":"fail","Package":"github.com/idemkit/idem/pgstore","Elapsed":0,"FailedBuild":"github.com/idemkit/idem/pgstore [github.com/idemkit/idem/pgstore.test]"}
`
	out, code := run(t, []byte(events), false)
	if code != 1 || !strings.Contains(out, "expected 'package'") || !strings.Contains(out, "build failed") {
		t.Errorf("exit %d, want 1 with the compiler's message\n%s", code, out)
	}
}

func TestNoPackagesIsAFailure(t *testing.T) {
	out, code := run(t, nil, false)
	if code != 1 {
		t.Errorf("exit %d for a run with no packages, want 1\n%s", code, out)
	}
}
