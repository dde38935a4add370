// Command releasetool releases idem's modules in lockstep: every module of
// the repository (the tracked go.mod files) at one version, each requiring
// its siblings at that version, with no replace directive, and with the
// go.sum lines for its siblings, computed in dependency order from the
// very files that are released. scripts/release runs it.
//
//	releasetool -proxy DIR VERSION   write a Go module proxy directory
//	                                 ($GOPROXY file layout: list, .info,
//	                                 .mod, .zip) for every module at
//	                                 VERSION, from the tracked files of
//	                                 the working tree; nothing else changes
//	releasetool -tag VERSION         rewrite every go.mod and go.sum in
//	                                 place for VERSION, commit, and tag
//	                                 every module (VERSION, dir/VERSION)
//	releasetool -set VERSION         require every sibling at VERSION in
//	                                 every go.mod and drop replace
//	                                 directives, in place (the go.sum
//	                                 lines of siblings are left to
//	                                 -tag); for the version being prepared
//	releasetool -check VERSION       report go.mod files with a replace
//	                                 directive or a sibling required at
//	                                 another version than VERSION, and a
//	                                 go.work that does not use every
//	                                 module and replace it at VERSION
//	                                 with its directory
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	proxy := flag.String("proxy", "", "write a module proxy directory for `DIR`")
	tag := flag.Bool("tag", false, "rewrite go.mod and go.sum files in place, commit and tag every module")
	check := flag.Bool("check", false, "only check the go.mod files: no replace, siblings at one version")
	set := flag.Bool("set", false, "require every sibling at VERSION in every go.mod, in place")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: releasetool (-proxy DIR VERSION | -tag VERSION | -set VERSION | -check)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *set {
		if *proxy != "" || *tag || *check || flag.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "release: -set takes one VERSION and no other flag")
			os.Exit(2)
		}
		if err := setVersion(flag.Arg(0)); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*proxy, *tag, *check, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(proxy string, tag, check bool, args []string) error {
	top, err := gitTop()
	if err != nil {
		return err
	}
	if check {
		if proxy != "" || tag || len(args) != 1 {
			return usageError{errors.New("-check takes one VERSION and no other flag")}
		}
		if err := validVersion(args[0]); err != nil {
			return err
		}
		return checkTree(top, args[0])
	}
	if (proxy == "") == !tag || len(args) != 1 {
		return usageError{errors.New("give either -proxy DIR or -tag, and one VERSION")}
	}
	version := args[0]
	if err := validVersion(version); err != nil {
		return err
	}
	if tag {
		return tagRelease(top, version)
	}
	return writeProxy(top, proxy, version)
}

// validVersion refuses what is not a canonical semantic version.
func validVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" || module.IsPseudoVersion(v) {
		return usageError{fmt.Errorf("VERSION %q is not a canonical semantic version such as v0.1.0 or v0.1.0-rc.1", v)}
	}
	return nil
}

// setVersion requires every sibling at version in every go.mod of the
// working tree and drops their replace directives.
func setVersion(version string) error {
	if err := validVersion(version); err != nil {
		return err
	}
	top, err := gitTop()
	if err != nil {
		return err
	}
	files, err := trackedFiles(top)
	if err != nil {
		return err
	}
	mods, err := readModules(top, files)
	if err != nil {
		return err
	}
	for _, m := range sorted(mods) {
		if err := m.retarget(mods, version); err != nil {
			return err
		}
		b, err := m.file.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(top, m.dir, "go.mod"), b, 0o644); err != nil {
			return err
		}
	}
	if err := setWork(top, mods, version); err != nil {
		return err
	}
	fmt.Printf("release: %d go.mod files require their siblings at %s; go.work replaces them at %s with their directories\n", len(mods), version, version)
	return nil
}

// setWork makes go.work replace every module at version with its
// directory: the go command reads the go.mod of every version a module of
// the workspace requires, even of a module the workspace holds, and
// version is not published while it is being prepared. The replacements
// live in go.work only, never in a published go.mod.
func setWork(top string, mods map[string]*mod, version string) error {
	p := filepath.Join(top, "go.work")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork(p, b, nil)
	if err != nil {
		return err
	}
	for _, r := range wf.Replace {
		if _, ok := mods[r.Old.Path]; ok {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, m := range sorted(mods) {
		dir := "./" + m.dir
		if m.dir == "." {
			dir = "./"
		}
		if err := wf.AddReplace(m.path, version, dir, ""); err != nil {
			return err
		}
	}
	wf.Cleanup()
	return os.WriteFile(p, modfile.Format(wf.Syntax), 0o644)
}

// retarget drops m's replace directives and requires its siblings at
// version.
func (m *mod) retarget(mods map[string]*mod, version string) error {
	for _, r := range m.file.Replace {
		if err := m.file.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return err
		}
	}
	for _, s := range m.siblings(mods) {
		if err := m.file.AddRequire(s, version); err != nil {
			return err
		}
	}
	m.file.Cleanup()
	return nil
}

// mod is one module of the repository.
type mod struct {
	dir  string // relative to the repository root, "." for the root
	path string // module path
	file *modfile.File
}

// gitTop returns the repository's top directory.
func gitTop() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git repository: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// trackedFiles lists the files of the working tree under top that git
// tracks or would (untracked files that .gitignore does not exclude: a
// new file not yet added is part of what is being released).
func trackedFiles(top string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = top
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// readModules reads every module of the tree at root, as scripts/modules
// finds them: the tracked go.mod files outside testdata directories.
func readModules(root string, files []string) (map[string]*mod, error) {
	mods := map[string]*mod{}
	for _, f := range files {
		if path.Base(f) != "go.mod" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, b, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s has no module line", f)
		}
		m := &mod{dir: path.Dir(f), path: mf.Module.Mod.Path, file: mf}
		mods[m.path] = m
	}
	if len(mods) == 0 {
		return nil, errors.New("no go.mod file is tracked")
	}
	return mods, nil
}

// siblings returns the sibling modules m requires, sorted.
func (m *mod) siblings(mods map[string]*mod) []string {
	var out []string
	for _, r := range m.file.Require {
		if _, ok := mods[r.Mod.Path]; ok {
			out = append(out, r.Mod.Path)
		}
	}
	sort.Strings(out)
	return out
}

// checkTree reports every go.mod with a replace directive, siblings
// required at another version than version, and a go.work that does not
// use every module and replace it at version with its directory.
func checkTree(top, version string) error {
	files, err := trackedFiles(top)
	if err != nil {
		return err
	}
	mods, err := readModules(top, files)
	if err != nil {
		return err
	}
	var problems []string
	versions := map[string][]string{}
	for _, m := range sorted(mods) {
		for _, r := range m.file.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod replaces %s (a published go.mod must not: go.work joins the modules in the repository)", m.dir, r.Old.Path))
		}
		for _, r := range m.file.Require {
			if _, ok := mods[r.Mod.Path]; ok {
				versions[r.Mod.Version] = append(versions[r.Mod.Version], m.dir+" → "+r.Mod.Path)
			}
		}
	}
	if len(versions) > 1 {
		var vs []string
		for v, who := range versions {
			vs = append(vs, fmt.Sprintf("%s (%s)", v, strings.Join(who, ", ")))
		}
		sort.Strings(vs)
		problems = append(problems, "siblings are required at different versions: "+strings.Join(vs, "; "))
	}
	for v, who := range versions {
		if v != version {
			ex := who
			if len(ex) > 3 {
				ex = append(ex[:3:3], fmt.Sprintf("and %d more", len(who)-3))
			}
			problems = append(problems, fmt.Sprintf("siblings are required at %s, not at %s (VERSION): %s; run scripts/release --set %s", v, version, strings.Join(ex, ", "), version))
		}
	}
	problems = append(problems, checkWork(top, mods, version)...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}
	fmt.Printf("release: %d modules, no replace directive, siblings at %s\n", len(mods), strings.Join(keys(versions), ","))
	return nil
}

// checkWork reports what go.work lacks: a use of every module, and a
// replacement of each at version with its directory.
func checkWork(top string, mods map[string]*mod, version string) []string {
	p := filepath.Join(top, "go.work")
	b, err := os.ReadFile(p)
	if err != nil {
		return []string{err.Error()}
	}
	wf, err := modfile.ParseWork(p, b, nil)
	if err != nil {
		return []string{err.Error()}
	}
	uses := map[string]bool{}
	for _, u := range wf.Use {
		uses[path.Clean(strings.TrimPrefix(u.Path, "./"))] = true
	}
	reps := map[string]string{}
	for _, r := range wf.Replace {
		reps[r.Old.Path+"@"+r.Old.Version] = path.Clean(strings.TrimPrefix(r.New.Path, "./"))
	}
	var problems []string
	for _, m := range sorted(mods) {
		if !uses[m.dir] {
			problems = append(problems, fmt.Sprintf("go.work does not use %s: run go work use ./%s", m.dir, m.dir))
		}
		if got, ok := reps[m.path+"@"+version]; !ok || got != m.dir {
			problems = append(problems, fmt.Sprintf("go.work does not replace %s %s with ./%s: run scripts/release --set %s", m.path, version, m.dir, version))
		}
	}
	if len(uses) != len(mods) {
		problems = append(problems, fmt.Sprintf("go.work uses %d directories for %d modules", len(uses), len(mods)))
	}
	return problems
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(mods map[string]*mod) []*mod {
	out := make([]*mod, 0, len(mods))
	for _, m := range mods {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}

// order returns the modules in dependency order (a module after every
// sibling it requires), or an error naming a cycle.
func order(mods map[string]*mod) ([]*mod, error) {
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []*mod
	var visit func(p string, stack []string) error
	visit = func(p string, stack []string) error {
		switch state[p] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("the modules require each other in a cycle: %s → %s", strings.Join(stack, " → "), p)
		}
		state[p] = visiting
		for _, s := range mods[p].siblings(mods) {
			if err := visit(s, append(stack, p)); err != nil {
				return err
			}
		}
		state[p] = done
		out = append(out, mods[p])
		return nil
	}
	for _, m := range sorted(mods) {
		if err := visit(m.path, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// closure returns every sibling m requires, directly or through another.
func closure(m *mod, mods map[string]*mod) []string {
	seen := map[string]bool{}
	var walk func(*mod)
	walk = func(x *mod) {
		for _, s := range x.siblings(mods) {
			if !seen[s] {
				seen[s] = true
				walk(mods[s])
			}
		}
	}
	walk(m)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// release rewrites every module under root for version, in dependency
// order: its go.mod (siblings required at version, replace directives
// dropped) and its go.sum (the lines for the siblings it builds with,
// hashed from their released files). It calls emit for each module once
// its files are final, with the module's zip (a temporary file) and
// go.mod.
func release(root string, mods map[string]*mod, version string, emit func(m *mod, zip string, gomod []byte) error) error {
	ord, err := order(mods)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "idem-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	type hashes struct{ zip, mod string }
	sums := map[string]hashes{}
	for _, m := range ord {
		if err := m.retarget(mods, version); err != nil {
			return err
		}
		gomod, err := m.file.Format()
		if err != nil {
			return err
		}
		dir := filepath.Join(root, m.dir)
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
			return err
		}
		var lines []string
		for _, s := range closure(m, mods) {
			lines = append(lines, fmt.Sprintf("%s %s %s", s, version, sums[s].zip), fmt.Sprintf("%s %s/go.mod %s", s, version, sums[s].mod))
		}
		if err := writeSum(filepath.Join(dir, "go.sum"), mods, lines); err != nil {
			return err
		}
		zipPath := filepath.Join(tmp, strings.ReplaceAll(m.path, "/", "_")+".zip")
		if err := makeZip(zipPath, m.path, version, dir); err != nil {
			return fmt.Errorf("module %s: %w", m.path, err)
		}
		zh, err := dirhash.HashZip(zipPath, dirhash.Hash1)
		if err != nil {
			return err
		}
		mh, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gomod)), nil })
		if err != nil {
			return err
		}
		sums[m.path] = hashes{zh, mh}
		if err := emit(m, zipPath, gomod); err != nil {
			return err
		}
	}
	return nil
}

// writeSum replaces the sibling lines of the go.sum at p with lines,
// keeping every other line, sorted as the go command writes them.
func writeSum(p string, mods map[string]*mod, lines []string) error {
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	keep := lines
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if _, ok := mods[f[0]]; ok {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	sort.Strings(keep)
	return os.WriteFile(p, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// makeZip writes the module zip of path@version from dir (nested modules
// and what the go command leaves out are left out).
func makeZip(zipPath, modPath, version, dir string) error {
	f, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	err = modzip.CreateFromDir(f, module.Version{Path: modPath, Version: version}, dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyTracked copies the tracked files of top into a new temporary
// directory, which it returns.
func copyTracked(top string, files []string) (string, error) {
	dst, err := os.MkdirTemp("", "idem-release-tree-")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		src := filepath.Join(top, f)
		fi, err := os.Lstat(src)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the working tree, not yet in git
			}
			return "", err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		out := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(out, b, fi.Mode().Perm()); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// writeProxy writes a module proxy directory for version at dir from the
// tracked files of the working tree.
func writeProxy(top, dir, version string) error {
	files, err := trackedFiles(top)
	if err != nil {
		return err
	}
	tree, err := copyTracked(top, files)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	mods, err := readModules(tree, files)
	if err != nil {
		return err
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`+"\n", version, time.Now().UTC().Format(time.RFC3339))
	n := 0
	err = release(tree, mods, version, func(m *mod, zip string, gomod []byte) error {
		esc, err := module.EscapePath(m.path)
		if err != nil {
			return err
		}
		v := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(v, 0o755); err != nil {
			return err
		}
		if err := appendVersion(filepath.Join(v, "list"), version); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(v, version+".info"), []byte(info), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(v, version+".mod"), gomod, 0o644); err != nil {
			return err
		}
		b, err := os.ReadFile(zip)
		if err != nil {
			return err
		}
		n++
		fmt.Printf("release: %s@%s (%d KiB)\n", m.path, version, len(b)>>10)
		return os.WriteFile(filepath.Join(v, version+".zip"), b, 0o644)
	})
	if err != nil {
		return err
	}
	fmt.Printf("release: %d modules at %s in %s (GOPROXY=file://%s)\n", n, version, dir, mustAbs(dir))
	return nil
}

func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// appendVersion adds version to a proxy's list file unless it is there.
func appendVersion(p, version string) error {
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range strings.Fields(string(b)) {
		if l == version {
			return nil
		}
	}
	return os.WriteFile(p, append(b, []byte(version+"\n")...), 0o644)
}

// tagRelease rewrites the working tree's go.mod and go.sum files for
// version, commits them and tags every module. The tree must be clean.
func tagRelease(top, version string) error {
	st := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	st.Dir = top
	out, err := st.Output()
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return errors.New("the working tree has uncommitted changes: commit or stash them first")
	}
	files, err := trackedFiles(top)
	if err != nil {
		return err
	}
	mods, err := readModules(top, files)
	if err != nil {
		return err
	}
	var tags []string
	if err := release(top, mods, version, func(m *mod, _ string, _ []byte) error {
		if m.dir == "." {
			tags = append(tags, version)
		} else {
			tags = append(tags, m.dir+"/"+version)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := git(top, "commit", "-a", "-m", "release "+version+": every module at "+version+", requiring its siblings at "+version); err != nil {
		return err
	}
	sort.Strings(tags)
	for _, t := range tags {
		if err := git(top, "tag", "-a", "-m", "idem "+version, t); err != nil {
			return err
		}
	}
	fmt.Printf("release: committed and tagged %d modules at %s: %s\n", len(tags), version, strings.Join(tags, " "))
	return nil
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
