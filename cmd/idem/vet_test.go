package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemvet"
)

var vetFixture = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "..", "..", "idemvet", "testdata", "mod")
}()

// vet runs idem vet in idemvet's fixture module.
func vet(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("GOWORK", "off")
	t.Chdir(vetFixture)
	o, e, code := runCLI(append([]string{"vet"}, args...)...)
	return code, o, e
}

func TestVetFindings(t *testing.T) {
	code, out, errs := vet(t, "./...")
	if code != exitFindings {
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

func TestVetTestsFlag(t *testing.T) {
	code, out, _ := vet(t, "--tests", "--json", "./pay")
	if code != exitFindings {
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

func TestVetClean(t *testing.T) {
	if code, out, errs := vet(t, "./clean"); code != exitOK || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errs)
	}
}

func TestVetOnly(t *testing.T) {
	if code, out, _ := vet(t, "-only", "nounique,retention", "./..."); code != exitOK {
		t.Errorf("exit %d with keyentropy not run:\n%s", code, out)
	}
}

func TestVetUsage(t *testing.T) {
	for _, args := range [][]string{{"-nosuchflag"}, {"-only", "nosuch"}} {
		if code, _, _ := vet(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := vet(t, "-h"); code != exitOK || !strings.Contains(out, "keyentropy") {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
}

func TestVetCannotRun(t *testing.T) {
	code, _, errs := vet(t, "./nosuchdir/...")
	if code != exitFailure || errs == "" {
		t.Errorf("exit %d, stderr %q; want 1 and a reason", code, errs)
	}
}
