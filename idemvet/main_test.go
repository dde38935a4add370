package idemvet_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemvet"
)

var fixture = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "testdata", "mod")
}()

// vet runs Main in the fixture module.
func vet(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("GOWORK", "off")
	t.Chdir(fixture)
	var out, errb bytes.Buffer
	code = idemvet.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMainFindings(t *testing.T) {
	code, out, errs := vet(t, "./...")
	if code != idemvet.ExitFindings {
		t.Fatalf("exit %d, want 3; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if !strings.Contains(out, filepath.Join("pay", "pay.go")+":12:") || !strings.Contains(out, "keyentropy: the Idempotency-Key header is built from math/rand.Int()") {
		t.Errorf("finding missing:\n%s", out)
	}
	// The directive with a reason silences the second and is listed.
	if strings.Contains(out, "pay.go:18:2: keyentropy") || !strings.Contains(out, "pay.go:18:14: keyentropy: a one-shot trace request, never retried") {
		t.Errorf("silenced finding not listed as such:\n%s", out)
	}
	// Test files are loaded but their findings dropped by default.
	if strings.Contains(out, "pay_test.go") {
		t.Errorf("test file finding reported without -tests:\n%s", out)
	}
}

func TestMainTestsFlag(t *testing.T) {
	code, out, _ := vet(t, "-tests", "-json", "./pay")
	if code != idemvet.ExitFindings {
		t.Fatalf("exit %d, want 3", code)
	}
	var rep idemvet.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range rep.Findings {
		files = append(files, filepath.Base(strings.SplitN(f.Posn, ":", 2)[0]))
	}
	if len(rep.Findings) != 2 || files[0] != "pay.go" || files[1] != "pay_test.go" {
		t.Errorf("findings = %+v, want one in pay.go and one in pay_test.go", rep.Findings)
	}
	if len(rep.Silenced) != 1 || rep.Silenced[0].Reason != "a one-shot trace request, never retried" {
		t.Errorf("silenced = %+v", rep.Silenced)
	}
}

func TestMainClean(t *testing.T) {
	if code, out, errs := vet(t, "./clean"); code != idemvet.ExitOK || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errs)
	}
}

func TestMainOnly(t *testing.T) {
	if code, out, _ := vet(t, "-only", "nounique,retention", "./..."); code != idemvet.ExitOK {
		t.Errorf("exit %d with keyentropy not run:\n%s", code, out)
	}
}

func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{{"-nosuchflag"}, {"-only", "nosuch"}} {
		if code, _, _ := vet(t, args...); code != idemvet.ExitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := vet(t, "-h"); code != idemvet.ExitOK || !strings.Contains(out, "keyentropy") {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
}

func TestMainCannotRun(t *testing.T) {
	code, _, errs := vet(t, "./nosuchdir/...")
	if code != idemvet.ExitFailure || errs == "" {
		t.Errorf("exit %d, stderr %q; want 1 and a reason", code, errs)
	}
}

// Every analyzer documents its danger and its fix.
func TestAnalyzersDocumented(t *testing.T) {
	for _, a := range idemvet.Analyzers() {
		if !strings.Contains(a.Doc, "\n\n") || !strings.Contains(a.Doc, "Fix") && a.Name != "ignoredirective" {
			t.Errorf("%s: Doc has no explanation or no fix:\n%s", a.Name, a.Doc)
		}
	}
}
