package vetutil

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// IdemPath is the import path of the idem root package.
const IdemPath = "github.com/idemkit/idem"

// PathIs reports whether an import path is want, allowing a vendor/
// prefix and a major version suffix (/v2, /v5 …).
func PathIs(path, want string) bool {
	if i := strings.LastIndex(path, "/vendor/"); i >= 0 {
		path = path[i+len("/vendor/"):]
	}
	if path == want {
		return true
	}
	rest, ok := strings.CutPrefix(path, want+"/v")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PathUnder reports whether path is want or a package below it (with the
// same allowances as [PathIs]).
func PathUnder(path, want string) bool {
	if PathIs(path, want) {
		return true
	}
	if i := strings.LastIndex(path, "/vendor/"); i >= 0 {
		path = path[i+len("/vendor/"):]
	}
	return strings.HasPrefix(path, want+"/")
}

// Callee is the function or method a call statically calls, or nil.
func Callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(info, call).(*types.Func)
	return fn
}

// FuncPath is the import path of fn's package, or "".
func FuncPath(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

// IsFunc reports whether fn is a package-level function of package path
// (per [PathIs]) named one of names.
func IsFunc(fn *types.Func, path string, names ...string) bool {
	if fn == nil || !PathIs(FuncPath(fn), path) {
		return false
	}
	if sig, ok := fn.Type().(*types.Signature); ok && sig.Recv() != nil {
		return false
	}
	for _, n := range names {
		if fn.Name() == n {
			return true
		}
	}
	return len(names) == 0
}

// RecvNamed is the named type of fn's receiver (pointer stripped), or nil.
func RecvNamed(fn *types.Func) *types.Named {
	if fn == nil {
		return nil
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return nil
	}
	return NamedOf(sig.Recv().Type())
}

// NamedOf strips pointers and aliases and returns the named type, or nil.
func NamedOf(t types.Type) *types.Named {
	t = types.Unalias(t)
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, _ := t.(*types.Named)
	return n
}

// IsNamed reports whether t (pointers stripped) is the named type path.name.
func IsNamed(t types.Type, path, name string) bool {
	n := NamedOf(t)
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Name() == name && PathIs(n.Obj().Pkg().Path(), path)
}

// StringConst is the constant string value of e, if it has one.
func StringConst(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// IntConst is the constant integer value of e, if it has one.
func IntConst(info *types.Info, e ast.Expr) (int64, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil {
		return 0, false
	}
	v := constant.ToInt(tv.Value)
	if v.Kind() != constant.Int {
		return 0, false
	}
	return constant.Int64Val(v)
}

// IsKeyHeader reports whether a header name is an idempotency key header.
func IsKeyHeader(name string) bool {
	n := strings.ToLower(name)
	return n == "idempotency-key" || n == "x-idempotency-key" || n == "idempotency-token"
}

// MutatingMethod reports whether an HTTP method changes state.
func MutatingMethod(m string) bool {
	switch strings.ToUpper(m) {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

// SkipPackage reports whether a pass is one whose package files were
// already seen by another pass (an external test package), so that
// analyzers of non-Go files do not report a file twice.
func SkipPackage(pass *analysis.Pass) bool {
	return strings.HasSuffix(pass.Pkg.Name(), "_test") || strings.HasSuffix(pass.Pkg.Path(), ".test")
}

// EnclosingFuncs calls fn for every function body in the pass's files:
// declarations and literals, each once, with the declaration it is in.
func EnclosingFuncs(pass *analysis.Pass, fn func(decl *ast.FuncDecl, body *ast.BlockStmt)) {
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn(fd, fd.Body)
		}
	}
}
