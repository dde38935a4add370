package keyentropy

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"
)

// program is the SSA form of a package's source functions.
type program struct {
	Pkg      *ssa.Package
	SrcFuncs []*ssa.Function
}

// buildSSA builds the package's SSA form as passes/buildssa does, but
// without buildssa's ctrlflow prerequisite: ctrlflow exports facts, so a
// driver must analyse every dependency from source to run it, which makes
// `idem vet ./...` several times slower (and the export-data-only loading
// of idemvet.Run impossible). keyentropy does not need to know which calls
// never return.
func buildSSA(pass *analysis.Pass) *program {
	prog := ssa.NewProgram(pass.Fset, 0)
	for _, p := range pass.Pkg.Imports() {
		prog.CreatePackage(p, nil, nil, true)
	}
	pkg := prog.CreatePackage(pass.Pkg, pass.Files, pass.TypesInfo, false)
	pkg.Build()
	var funcs []*ssa.Function
	var add func(f *ssa.Function)
	add = func(f *ssa.Function) {
		funcs = append(funcs, f)
		for _, anon := range f.AnonFuncs {
			add(anon)
		}
	}
	for _, file := range pass.Files {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			if f := prog.FuncValue(fn); f != nil {
				add(f)
			}
		}
	}
	return &program{Pkg: pkg, SrcFuncs: funcs}
}
