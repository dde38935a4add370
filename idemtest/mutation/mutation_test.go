package mutation_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemtest/mutation"
)

const list = `# a guard and its tests
id: guard/positive
item: constraint
what: zero counts as positive
file: guard.go
find: return n > 0
replace: return n >= 0
packages: .
run: ^TestPositive$

id: guard/untested
item: replay
file: guard.go
find:
|func Untested() int {
|	return 1
replace:
|func Untested() int {
|	return 2
packages: .

id: guard/hangs
item: concurrency
file: guard.go
find: func Wait() {}
replace: func Wait() { time.Sleep(time.Hour) }
packages: .
run: ^TestWait$
timeout: 2s

id: guard/missing
item: retention
file: guard.go
find: return n < 0
replace: return true
packages: .

id: guard/twice
item: retention
file: guard.go
find: return
replace: return -1 +
packages: .

id: guard/broken
item: scope
file: guard.go
find: return n > 0
replace: return n >
packages: .

id: guard/no-test
item: scope
file: guard.go
find: return n > 0
replace: return n < 0
packages: .
run: ^TestNothingByThisName$

id: guard/deleted
item: observability
what:
|the whole check goes,
|on two lines
file: guard.go
find:
|	if n == 7 {
|		panic("seven")
|	}
replace:
packages: .
run: ^TestSeven$
env: GUARD_TEST=1
`

const guardGo = `package guard

import "time"

var _ = time.Second

func Positive(n int) bool {
	return n > 0
}

func Untested() int {
	return 1
}

func Wait() {}

func Seven(n int) {
	if n == 7 {
		panic("seven")
	}
}
`

const guardTest = `package guard

import (
	"os"
	"testing"
)

func TestPositive(t *testing.T) {
	if !Positive(1) || Positive(0) {
		t.Fatal("Positive is wrong")
	}
}

func TestWait(t *testing.T) { Wait() }

func TestSeven(t *testing.T) {
	if os.Getenv("GUARD_TEST") != "1" {
		t.Skip("GUARD_TEST is not set")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("seven did not panic")
		}
	}()
	Seven(7)
}
`

// module writes a small module with a guard and its tests.
func module(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod": "module example.com/guard\n\ngo 1.22\n", "guard.go": guardGo, "guard_test.go": guardTest,
		".git/HEAD": "not copied\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func parse(t *testing.T) []mutation.Mutation {
	t.Helper()
	muts, err := mutation.Parse(strings.NewReader(list), "list.txt")
	if err != nil {
		t.Fatal(err)
	}
	return muts
}

// TestRunClassifies runs every kind of mutation against a small module:
// each is classified as it must be, the copy is reverted after each (the
// later ones apply to the original text), and the original tree is never
// touched.
func TestRunClassifies(t *testing.T) {
	t.Parallel()
	dir := module(t)
	muts := parse(t)
	var progress strings.Builder
	scratch := filepath.Join(t.TempDir(), "scratch")
	rep, err := mutation.Run(context.Background(), mutation.Config{
		Root: dir, Scratch: scratch, Timeout: time.Minute, Baseline: true, Progress: &progress,
	}, muts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]mutation.Status{
		"guard/positive": mutation.Killed, "guard/untested": mutation.Survived, "guard/hangs": mutation.Hung,
		"guard/missing": mutation.Invalid, "guard/twice": mutation.Invalid, "guard/broken": mutation.Invalid,
		"guard/no-test": mutation.Invalid, "guard/deleted": mutation.Killed,
	}
	for _, r := range rep.Results {
		if r.Status != want[r.Mutation.ID] {
			t.Errorf("%s: %s (%s), want %s\n%s", r.Mutation.ID, r.Status, r.Reason, want[r.Mutation.ID], r.Output)
		}
	}
	byID := map[string]mutation.Result{}
	for _, r := range rep.Results {
		byID[r.Mutation.ID] = r
	}
	if k := byID["guard/positive"].Killers; !reflect.DeepEqual(k, []string{"guard.TestPositive"}) {
		t.Errorf("killers %v, want guard.TestPositive", k)
	}
	for id, reason := range map[string]string{
		"guard/missing": "not in guard.go", "guard/twice": "occurs 2 times", "guard/broken": "does not compile",
		"guard/no-test": "no test ran", "guard/hangs": "hung past the timeout of 2s", "guard/untested": "passed",
	} {
		if r := byID[id]; !strings.Contains(r.Reason, reason) {
			t.Errorf("%s: reason %q, want it to say %q", id, r.Reason, reason)
		}
	}
	if !rep.Failed() {
		t.Error("the report does not fail with survivors, hangs and invalid entries")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "guard.go")); string(b) != guardGo {
		t.Error("the original tree was modified")
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(scratch)
		if len(entries) != 0 {
			t.Errorf("the scratch copy was left behind: %v", entries)
		}
	}
	for _, line := range []string{"baseline [1/", "guard/positive (constraint) ... killed", "guard/untested (replay) ... survived"} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, progress.String())
		}
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	for _, row := range []string{"| constraint | 1 | 1 | 0 | 0 | 0 | 100 % |", "| retention | 2 | 0 | 0 | 0 | 2 | 0 % |", "| **all** | 8 | 2 | 1 | 1 | 4 | 25 % |"} {
		if !strings.Contains(md.String(), row) {
			t.Errorf("markdown lacks %q:\n%s", row, md.String())
		}
	}
}

// TestCopyLeavesGitOut: .git is not copied.
func TestCopyLeavesGitOut(t *testing.T) {
	t.Parallel()
	dir := module(t)
	scratch := filepath.Join(t.TempDir(), "s")
	_, err := mutation.Run(context.Background(), mutation.Config{Root: dir, Scratch: scratch, Keep: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(scratch, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git was copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(scratch, "guard_test.go")); err != nil {
		t.Errorf("the tree was not copied: %v", err)
	}
}

// TestBaselineRefusesFailingTests: a kill means nothing when the tests fail
// without the mutation.
func TestBaselineRefusesFailingTests(t *testing.T) {
	t.Parallel()
	dir := module(t)
	if err := os.WriteFile(filepath.Join(dir, "fail_test.go"), []byte("package guard\n\nimport \"testing\"\n\nfunc TestPositiveFails(t *testing.T) { t.Fatal(\"always\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := parse(t)[0]
	m.Run = "^TestPositive"
	_, err := mutation.Run(context.Background(), mutation.Config{Root: dir, Baseline: true}, []mutation.Mutation{m})
	if !errors.Is(err, mutation.ErrBaseline) || !strings.Contains(err.Error(), "TestPositiveFails") {
		t.Fatalf("err = %v, want ErrBaseline naming the failing test", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := module(t)
	var ids []string
	for _, r := range mutation.Check(dir, parse(t)) {
		ids = append(ids, r.Mutation.ID)
	}
	if want := []string{"guard/missing", "guard/twice"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("invalid %v, want %v", ids, want)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	muts := parse(t)
	if len(muts) != 8 {
		t.Fatalf("%d mutations, want 8", len(muts))
	}
	m := muts[7]
	if m.ID != "guard/deleted" || m.What != "the whole check goes,\non two lines" || m.Replace != "" ||
		m.Find != "\tif n == 7 {\n\t\tpanic(\"seven\")\n\t}" || !reflect.DeepEqual(m.Env, []string{"GUARD_TEST=1"}) ||
		m.Source != "list.txt:60" {
		t.Fatalf("%+v", m)
	}
	if muts[2].Timeout != 2*time.Second || muts[0].Run != "^TestPositive$" || !reflect.DeepEqual(muts[0].Packages, []string{"."}) {
		t.Fatalf("%+v", muts[2])
	}
	for _, c := range []struct{ text, err string }{
		{"item: replay\n", "before the first id"},
		{"id: a\nitem: x\nfile: f.go\nfind: a\nreplace: b\n", "has no packages"},
		{"id: a\nitem: x\nfile: f.go\nfind: a\nreplace: a\npackages: .\n", "same as find"},
		{"id: a\nitem: x\nfile: ../f.go\n", "inside the tree"},
		{"id: a\nitem: x\nitem: y\n", "given twice"},
		{"id: a\nbogus: 1\n", "unknown field"},
		{"id: a\n|x\n", "outside a multi-line field"},
		{"id: a b\n", "one word"},
		{"id: a\ntimeout: soon\n", "positive duration"},
	} {
		if _, err := mutation.Parse(strings.NewReader(c.text), "l"); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: err = %v, want %q", c.text, err, c.err)
		}
	}
}

func TestLoadRefusesDuplicateIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	entry := "id: a\nitem: x\nfile: f.go\nfind: a\nreplace: b\npackages: .\n"
	for _, f := range []string{"1.txt", "2.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(entry), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mutation.Load(dir); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("err = %v", err)
	}
	muts, err := mutation.Load(filepath.Join(dir, "1.txt"))
	if err != nil || len(muts) != 1 {
		t.Fatalf("%v %v", muts, err)
	}
}

// TestShardPartitions: the shards of a list are disjoint and together the
// whole list, and a mutation's shard does not depend on the others.
func TestShardPartitions(t *testing.T) {
	t.Parallel()
	var muts []mutation.Mutation
	for i := range 200 {
		muts = append(muts, mutation.Mutation{ID: fmt.Sprintf("m%d", i)})
	}
	for _, n := range []int{1, 2, 3, 7} {
		seen := map[string]int{}
		for i := range n {
			part := mutation.Shard(muts, i, n)
			if n > 1 && (len(part) < 200/n/2 || len(part) > 2*200/n) {
				t.Errorf("shard %d/%d has %d of 200", i, n, len(part))
			}
			for _, m := range part {
				seen[m.ID]++
				if alone := mutation.Shard([]mutation.Mutation{m}, i, n); len(alone) != 1 {
					t.Errorf("%s moved shard when alone", m.ID)
				}
			}
		}
		for _, m := range muts {
			if seen[m.ID] != 1 {
				t.Errorf("n=%d: %s in %d shards", n, m.ID, seen[m.ID])
			}
		}
	}
}
