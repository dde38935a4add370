package vetutil

import (
	"go/token"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// File is a non-Go file of a package, added to the pass's file set so that
// findings in it have positions.
type File struct {
	Name    string
	Content []byte
	TF      *token.File
}

// Pos is the position of byte offset off.
func (f *File) Pos(off int) token.Pos { return f.TF.Pos(off) }

// PackageFiles returns the files with one of exts (".sql", ".yml") in the
// package's directory and in the directories below it that hold no Go
// package of their own (a migrations/ or deploy/ directory), so that each
// such file belongs to exactly one package. Unreadable directories are
// skipped. It returns nothing for external test packages.
func PackageFiles(pass *analysis.Pass, exts ...string) []*File {
	if SkipPackage(pass) || len(pass.Files) == 0 {
		return nil
	}
	dir := filepath.Dir(pass.Fset.Position(pass.Files[0].Pos()).Filename)
	var out []*File
	var walk func(d string, top bool)
	walk = func(d string, top bool) {
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		if !top {
			for _, e := range ents {
				if !e.IsDir() && (strings.HasSuffix(e.Name(), ".go") || e.Name() == "go.mod") {
					return // another package or module
				}
			}
		}
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				continue
			}
			p := filepath.Join(d, name)
			if e.IsDir() {
				if name != "testdata" && name != "vendor" && name != "node_modules" {
					walk(p, false)
				}
				continue
			}
			for _, x := range exts {
				if strings.HasSuffix(name, x) {
					b, err := os.ReadFile(p)
					if err != nil {
						break
					}
					tf := pass.Fset.AddFile(p, -1, len(b))
					tf.SetLinesForContent(b)
					out = append(out, &File{Name: p, Content: b, TF: tf})
					break
				}
			}
		}
	}
	walk(dir, true)
	return out
}
