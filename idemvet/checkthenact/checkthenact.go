// Package checkthenact finds a dedup check that is a separate step from
// the effect it guards.
package checkthenact

import (
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report a dedup check, an effect and a later insert of the same key

	if !store.Exists(ctx, key) {
		charge(ctx, order)       // a concurrent duplicate does the same
		store.Insert(ctx, key)
	}

A check that is not atomic with the effect is a race, not a guard: two
deliveries of one message both read "not seen", both run the effect, and
both insert. checkthenact reports a read of existence (Exists, Has, Get or
Load returning a found flag, a SELECT … WHERE or EXISTS query) whose result
decides, in the same function, whether a side-effecting call runs that is
followed by an insert of the same key.

Fix: claim the key before the effect, atomically: an INSERT that a unique
constraint refuses for the second caller, Redis SET NX, or idem.Do, which
claims, runs the effect once and records its outcome.`

// Analyzer is the checkthenact analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "checkthenact",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#checkthenact",
	Run:        run,
	ResultType: vetutil.ResultType,
}

var (
	checkNames  = regexp.MustCompile(`^(Exists|Has|HasKey|Contains|IsProcessed|Processed|WasProcessed|Seen|IsSeen|IsDuplicate|Get|Lookup|Find|FindByKey|GetByKey|Load|Count|SIsMember|HExists)`)
	insertNames = regexp.MustCompile(`^(Insert|Add|Set|Put|Mark|Save|Store|Record|Create|Remember|SAdd|HSet)`)
	claimNames  = regexp.MustCompile(`^(SetNX|SetNx|SetIfAbsent|PutIfAbsent|LoadOrStore|Claim|TryClaim)`)
	selectSQL   = regexp.MustCompile(`(?is)^\s*select\b.*\b(exists|count|where)\b`)
	insertSQL   = regexp.MustCompile(`(?is)^\s*(insert|upsert|replace)\b`)
	decodeNames = regexp.MustCompile(`^(Unmarshal|Marshal|Decode|Encode)`)
	anySQL      = regexp.MustCompile(`(?is)^\s*(select|insert|upsert|replace|update|delete|with|merge)\b`)
)

type callKind int

const (
	other callKind = iota
	check
	insert
	claim
)

type callInfo struct {
	call   *ast.CallExpr
	kind   callKind
	keys   []string // the non-constant arguments, printed
	effect bool     // for other calls: whether it may have a side effect
	tx     string   // the receiver, when it is a database transaction
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body != nil {
					checkBody(pass, rep, n.Body)
				}
			case *ast.FuncLit:
				checkBody(pass, rep, n.Body)
			}
			return true
		})
	}
	return rep.Result, nil
}

// checkBody looks at one function body (not the literals inside it, which
// are bodies of their own).
func checkBody(pass *analysis.Pass, rep *vetutil.Reporter, body *ast.BlockStmt) {
	var calls []callInfo
	results := map[types.Object]*callInfo{} // variable -> the check it holds
	var ifs []*ast.IfStmt
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.IfStmt:
			ifs = append(ifs, n)
		case *ast.CallExpr:
			calls = append(calls, classify(pass, n))
		}
		return true
	})
	// Variables assigned from a check: found, _ := store.Exists(k).
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 {
			return true
		}
		call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
		if !ok {
			return true
		}
		chain := callChain(call)
		for i := range calls {
			if chain[calls[i].call] && calls[i].kind == check {
				for _, l := range as.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
						if obj := pass.TypesInfo.ObjectOf(id); obj != nil {
							results[obj] = &calls[i]
						}
					}
				}
			}
		}
		return true
	})
	// Scan(&n) of a SELECT: the scanned variables hold the check too.
	for i := range calls {
		c := &calls[i]
		sel, ok := c.call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Scan" {
			continue
		}
		inner := innermostCall(sel.X)
		for j := range calls {
			if calls[j].call == inner && calls[j].kind == check {
				for _, a := range c.call.Args {
					if u, ok := a.(*ast.UnaryExpr); ok && u.Op == token.AND {
						if id, ok := u.X.(*ast.Ident); ok {
							if obj := pass.TypesInfo.ObjectOf(id); obj != nil {
								results[obj] = &calls[j]
							}
						}
					}
				}
			}
		}
	}
	for _, is := range ifs {
		var guards []*callInfo
		ast.Inspect(is.Cond, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				for i := range calls {
					if calls[i].call == n && calls[i].kind == check {
						guards = append(guards, &calls[i])
					}
				}
			case *ast.Ident:
				if ci, ok := results[pass.TypesInfo.ObjectOf(n)]; ok {
					guards = append(guards, ci)
				}
			}
			return true
		})
		for _, g := range guards {
			// if !found { effect; insert } guards the body; if found {
			// return } guards what follows the if.
			effect, ins := race(calls, g, is.Body.Pos(), is.Body.End())
			if effect == nil && terminates(is.Body) {
				effect, ins = race(calls, g, is.End(), body.End())
			}
			if effect != nil {
				rep.Reportf(g.call.Pos(), "check-then-act: %s checks the key, %s runs the effect and %s inserts the key later; two concurrent deliveries both pass the check and both run the effect: claim the key first (INSERT under a unique constraint, SET NX) or use idem.Do",
					name(g.call), name(effect.call), name(ins.call))
				break
			}
		}
	}
}

// race finds, after the condition, an effect followed by an insert of a
// key the check read, with no claim of it in between.
//
// A write on the same transaction as the insert is not an effect that
// escapes: it commits or rolls back with the insert.
func race(calls []callInfo, g *callInfo, from, to token.Pos) (effect, ins *callInfo) {
	var effects []*callInfo
	for i := range calls {
		c := &calls[i]
		if c.call.Pos() < from || c.call.End() > to {
			continue
		}
		switch c.kind {
		case claim, insert:
			if shares(c.keys, g.keys) {
				if c.kind == claim {
					return nil, nil // claimed before the effect
				}
				for _, e := range effects {
					if e.tx == "" || e.tx != c.tx {
						return e, c
					}
				}
				return nil, nil
			}
		case other:
			if c.effect {
				effects = append(effects, c)
			}
		}
	}
	return nil, nil
}

func shares(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func innermostCall(e ast.Expr) *ast.CallExpr {
	c, _ := ast.Unparen(e).(*ast.CallExpr)
	return c
}

// callChain is the set of calls in a method chain: a.QueryRow(…).Scan(…).
func callChain(c *ast.CallExpr) map[*ast.CallExpr]bool {
	out := map[*ast.CallExpr]bool{}
	for c != nil {
		out[c] = true
		sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
		if !ok {
			break
		}
		c, _ = ast.Unparen(sel.X).(*ast.CallExpr)
	}
	return out
}

// terminates reports whether a block ends by leaving the function or loop.
func terminates(b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	switch s := b.List[len(b.List)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok == token.CONTINUE || s.Tok == token.BREAK || s.Tok == token.GOTO
	case *ast.ExprStmt:
		if c, ok := s.X.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "panic" {
				return true
			}
		}
	}
	return false
}

// pure are packages whose calls are not effects.
var pure = map[string]bool{
	"fmt": true, "strings": true, "strconv": true, "errors": true, "log": true, "log/slog": true,
	"time": true, "sort": true, "slices": true, "maps": true, "bytes": true, "math": true,
	"context": true, "encoding/json": true, "sync": true, "sync/atomic": true, "unicode/utf8": true,
}

func name(call *ast.CallExpr) string {
	s := types.ExprString(call.Fun)
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return s + "()"
}

func classify(pass *analysis.Pass, call *ast.CallExpr) callInfo {
	ci := callInfo{call: call}
	fn := vetutil.Callee(pass.TypesInfo, call)
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
		if n := vetutil.NamedOf(pass.TypesInfo.TypeOf(sel.X)); n != nil && strings.HasSuffix(n.Obj().Name(), "Tx") {
			ci.tx = types.ExprString(sel.X)
		}
	}
	var fname string
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		fname = f.Sel.Name
	case *ast.Ident:
		fname = f.Name
	case *ast.IndexExpr:
		if sel, ok := f.X.(*ast.SelectorExpr); ok {
			fname = sel.Sel.Name
		}
	}
	if tv, ok := pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
		return ci // a conversion
	}
	if _, ok := pass.TypesInfo.Uses[identOf(call.Fun)].(*types.Builtin); ok {
		return ci
	}
	if pure[vetutil.FuncPath(fn)] || strings.HasPrefix(vetutil.FuncPath(fn), "encoding/") {
		return ci // fmt.Errorf("insert …"), strings.HasPrefix: neither check, insert nor effect
	}
	if decodeNames.MatchString(fname) {
		return ci // decoding what was read is no effect
	}
	var sql string
	for _, a := range call.Args {
		if s, ok := vetutil.StringConst(pass.TypesInfo, a); ok {
			if sql == "" && anySQL.MatchString(s) {
				sql = s
			}
			continue
		}
		if t := pass.TypesInfo.TypeOf(a); t != nil && vetutil.IsNamed(t, "context", "Context") {
			continue
		}
		ci.keys = append(ci.keys, types.ExprString(a))
	}
	switch {
	case claimNames.MatchString(fname):
		ci.kind = claim
	case selectSQL.MatchString(sql):
		ci.kind = check
	case insertSQL.MatchString(sql):
		ci.kind = insert
	case checkNames.MatchString(fname) && sql == "" && returnsFound(pass.TypesInfo.TypeOf(call)):
		ci.kind = check
	case insertNames.MatchString(fname) && sql == "" && len(ci.keys) > 0:
		ci.kind = insert
	}
	if ci.kind == other {
		ci.effect = fn == nil || !pure[vetutil.FuncPath(fn)]
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Scan" || sel.Sel.Name == "Err" || sel.Sel.Name == "Val" || sel.Sel.Name == "Result" || sel.Sel.Name == "Close") {
			ci.effect = false
		}
	}
	return ci
}

func identOf(e ast.Expr) *ast.Ident {
	id, _ := ast.Unparen(e).(*ast.Ident)
	return id
}

// returnsFound reports whether a check's result can say "found": a bool,
// a number, a tuple holding one, or a command object (go-redis) whose
// value is read later.
func returnsFound(t types.Type) bool {
	switch t := t.(type) {
	case nil:
		return false
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			if returnsFound(t.At(i).Type()) {
				return true
			}
		}
		return false
	}
	if b, ok := t.Underlying().(*types.Basic); ok {
		return b.Info()&(types.IsBoolean|types.IsInteger) != 0
	}
	if n := vetutil.NamedOf(t); n != nil && n.Obj().Pkg() != nil && strings.Contains(n.Obj().Pkg().Path(), "redis") {
		return true
	}
	return false
}
