// Package sharednamespace finds idempotency keys whose namespace is shared
// by different operations, and key formats without a version.
package sharednamespace

import (
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report key namespaces shared by two operations and key formats without a version

One order id can drive a charge and a refund; if both keys are built from
the same prefix ("order:" + id, idem.DeriveKey("order", 1, id)), the refund
replays the charge's recorded outcome and never runs. And a key format
without a version ("charge:%s") cannot change its derivation later without
colliding with the keys already stored.

sharednamespace reports a namespace given to idem.DeriveKey, or the literal
prefix of a key built with fmt.Sprintf or +, used in functions of different
operations (charge and refund, send and cancel…), a key format with no
version segment (v1), and one with no namespace at all.

Fix: one namespace per operation and a version in every format:
idem.DeriveKey("refund", 1, order.ID) or "refund:v1:" + order.ID. A
suggested fix inserts "v1:" after a format's namespace.`

// Analyzer is the sharednamespace analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "sharednamespace",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#sharednamespace",
	Run:        run,
	ResultType: vetutil.ResultType,
}

var (
	opWords   = regexp.MustCompile(`charge|refund|capture|payout|transfer|cancel|void|reverse|credit|debit|withdraw|deposit|invoice|subscri|email|sms|notif|send|ship|book|order|pay`)
	versionRE = regexp.MustCompile(`(^|[:/_.\-])v[0-9]+([:/_.\-%]|$)`)
	nsRE      = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_.]*)([:/|\-])`)
)

type site struct {
	pos token.Pos
	ns  string
	ops []string
	fn  string
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	var sites []site
	vetutil.EnclosingFuncs(pass, func(decl *ast.FuncDecl, body *ast.BlockStmt) {
		ops := operations(pass, decl)
		sinks := keySinks(pass, body)
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := vetutil.Callee(pass.TypesInfo, call)
			if vetutil.IsFunc(fn, vetutil.IdemPath, "DeriveKey", "MustDeriveKey") && len(call.Args) > 0 {
				if ns, ok := vetutil.StringConst(pass.TypesInfo, call.Args[0]); ok {
					sites = append(sites, site{call.Pos(), ns, ops, decl.Name.Name})
				}
			}
			return true
		})
		for _, e := range sinks {
			format, lit := formatOf(pass, e)
			if format == "" {
				continue
			}
			m := nsRE.FindStringSubmatch(format)
			switch {
			case m == nil:
				rep.Reportf(e.Pos(), "idempotency key format %q has no operation namespace: two operations on one id get one key, and the second replays the first; prefix it with the operation and a version (\"refund:v1:%%s\") or use idem.DeriveKey", format)
				continue
			case !versionRE.MatchString(format):
				d := analysis.Diagnostic{Pos: e.Pos(), Message: "idempotency key format " + quote(format) + " has no version: its derivation can never change without colliding with stored keys; add one (\"" + m[1] + m[2] + "v1" + m[2] + "…\") or use idem.DeriveKey"}
				if lit != nil && strings.HasPrefix(lit.Value, `"`+m[0]) || lit != nil && strings.HasPrefix(lit.Value, "`"+m[0]) {
					at := lit.Pos() + token.Pos(1+len(m[0]))
					d.SuggestedFixes = []analysis.SuggestedFix{{
						Message:   "add a version to the key format",
						TextEdits: []analysis.TextEdit{{Pos: at, End: at, NewText: []byte("v1" + m[2])}},
					}}
				}
				rep.Report(d)
			}
			sites = append(sites, site{e.Pos(), m[1], ops, decl.Name.Name})
		}
	})
	// A namespace used by functions of different operations.
	byNS := map[string][]site{}
	for _, s := range sites {
		byNS[s.ns] = append(byNS[s.ns], s)
	}
	names := make([]string, 0, len(byNS))
	for ns := range byNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		ss := byNS[ns]
		sort.Slice(ss, func(i, j int) bool { return ss[i].pos < ss[j].pos })
		for i := 1; i < len(ss); i++ {
			for j := 0; j < i; j++ {
				if a, b := ss[j], ss[i]; len(a.ops) > 0 && len(b.ops) > 0 && disjoint(a.ops, b.ops) {
					rep.Reportf(b.pos, "idempotency key namespace %q is shared by %s (%s) and %s (%s): the second operation on one id replays the first's outcome and never runs; give each operation its own namespace", ns, a.fn, a.ops[0], b.fn, b.ops[0])
					j = i
				}
			}
		}
	}
	return rep.Result, nil
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func disjoint(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return false
			}
		}
	}
	return true
}

// operations are the operation words of a function: its name, and the
// Operation of an idem.Request or Intent it builds.
func operations(pass *analysis.Pass, decl *ast.FuncDecl) []string {
	var ops []string
	add := func(s string) {
		for _, w := range opWords.FindAllString(strings.ToLower(s), -1) {
			if w == "pay" && strings.Contains(strings.ToLower(s), "payout") {
				continue
			}
			ops = append(ops, w)
		}
	}
	add(decl.Name.Name)
	ast.Inspect(decl.Body, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Operation" {
				if s, ok := vetutil.StringConst(pass.TypesInfo, kv.Value); ok {
					add(s)
				}
			}
		}
		return true
	})
	// "order" is the object of most operations, not one: drop it when a
	// more specific word is present.
	if len(ops) > 1 {
		out := ops[:0]
		for _, o := range ops {
			if o != "order" && o != "pay" {
				out = append(out, o)
			}
		}
		if len(out) > 0 {
			ops = out
		}
	}
	return ops
}

// keySinks are the expressions in body that become an idempotency key:
// idem.ParseKey's argument, an idem.Key conversion, the Key of an
// idem.Request, an Idempotency-Key header value, an IdempotencyKey field
// or setter; and the values of local variables used there.
func keySinks(pass *analysis.Pass, body *ast.BlockStmt) []ast.Expr {
	var out []ast.Expr
	vars := map[types.Object]bool{}
	add := func(e ast.Expr) {
		e = ast.Unparen(e)
		if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
			// stripe.String(x), string(x), idem.Key(x)
			if tv, ok := pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
				e = call.Args[0]
			} else if fn := vetutil.Callee(pass.TypesInfo, call); fn != nil && fn.Pkg() != nil && fn.Pkg() != pass.Pkg && strings.Contains(fn.Name(), "String") {
				e = call.Args[0]
			}
		}
		if id, ok := e.(*ast.Ident); ok {
			if obj := pass.TypesInfo.ObjectOf(id); obj != nil {
				vars[obj] = true
			}
			return
		}
		out = append(out, e)
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if tv, ok := pass.TypesInfo.Types[n.Fun]; ok && tv.IsType() && vetutil.IsNamed(tv.Type, vetutil.IdemPath, "Key") && len(n.Args) == 1 {
				add(n.Args[0])
				return true
			}
			fn := vetutil.Callee(pass.TypesInfo, n)
			switch {
			case fn == nil:
			case vetutil.IsFunc(fn, vetutil.IdemPath, "ParseKey") && len(n.Args) == 1:
				add(n.Args[0])
			case fn.Name() == "SetIdempotencyKey" && len(n.Args) == 1:
				add(n.Args[0])
			case (fn.Name() == "Set" || fn.Name() == "Add") && len(n.Args) == 2:
				if h, ok := vetutil.StringConst(pass.TypesInfo, n.Args[0]); ok && vetutil.IsKeyHeader(h) {
					add(n.Args[1])
				}
			}
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok && (id.Name == "IdempotencyKey" || id.Name == "Key" && isRequestField(pass, id)) {
				add(n.Value)
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && (sel.Sel.Name == "IdempotencyKey" || sel.Sel.Name == "Key" && isRequestField(pass, sel.Sel)) {
						add(n.Rhs[i])
					}
				}
			}
		}
		return true
	})
	// Values assigned to the variables used as keys.
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, l := range as.Lhs {
			if id, ok := l.(*ast.Ident); ok && vars[pass.TypesInfo.ObjectOf(id)] {
				out = append(out, as.Rhs[i])
			}
		}
		return true
	})
	return out
}

func isRequestField(pass *analysis.Pass, id *ast.Ident) bool {
	v, ok := pass.TypesInfo.ObjectOf(id).(*types.Var)
	if !ok || !v.IsField() || v.Pkg() == nil {
		return false
	}
	return vetutil.PathIs(v.Pkg().Path(), vetutil.IdemPath)
}

// formatOf is the constant text a key expression starts with: a
// fmt.Sprintf format, or the constant left side of a concatenation; lit
// is its literal when it is one.
func formatOf(pass *analysis.Pass, e ast.Expr) (string, *ast.BasicLit) {
	e = ast.Unparen(e)
	switch e := e.(type) {
	case *ast.CallExpr:
		fn := vetutil.Callee(pass.TypesInfo, e)
		if vetutil.IsFunc(fn, "fmt", "Sprintf") && len(e.Args) > 1 {
			s, ok := vetutil.StringConst(pass.TypesInfo, e.Args[0])
			if !ok {
				return "", nil
			}
			lit, _ := ast.Unparen(e.Args[0]).(*ast.BasicLit)
			return s, lit
		}
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", nil
		}
		// The leftmost operand of a + chain.
		left := ast.Expr(e)
		for {
			b, ok := ast.Unparen(left).(*ast.BinaryExpr)
			if !ok || b.Op != token.ADD {
				break
			}
			left = b.X
		}
		if _, ok := pass.TypesInfo.Types[e].Value, true; ok && pass.TypesInfo.Types[e].Value != nil {
			return "", nil // a constant key
		}
		s, ok := vetutil.StringConst(pass.TypesInfo, left)
		if !ok {
			return "%s", nil // starts with a variable
		}
		lit, _ := ast.Unparen(left).(*ast.BasicLit)
		return s + "%s", lit
	}
	return "", nil
}
