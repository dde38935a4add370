// Package unkeyedretry finds retries of mutating calls that carry no
// idempotency key.
package unkeyedretry

import (
	"go/ast"
	"go/types"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report retries around mutating calls that carry no idempotency key

A retry after a timeout cannot know whether the first attempt was applied;
if the request carries no idempotency key, the provider applies it again.
unkeyedretry reports a POST, PUT, PATCH or DELETE (or a provider SDK
mutation such as stripe-go's paymentintent.New) that is retried by
hashicorp/go-retryablehttp (which retries POST on 5xx by default),
cenkalti/backoff, avast/retry-go, sethvargo/go-retry, or a for loop that
sleeps between calls to http.Client.Do, when the function sets no
Idempotency-Key header and no IdempotencyKey parameter.

Fix: derive the key once, before the retry, from the intent (the incoming
request's key, idem.DeriveKey over stored ids), and send it on every
attempt: req.Header.Set("Idempotency-Key", key), params.IdempotencyKey =
stripe.String(key), or a.ForwardKey() inside idem.Do.`

// Analyzer is the unkeyedretry analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "unkeyedretry",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#unkeyedretry",
	Run:        run,
	ResultType: vetutil.ResultType,
}

var sdkMutation = regexp.MustCompile(`^(New|Create|Update|Cancel|Capture|Confirm|Pay|Refund|Del|Delete|Reverse|Void|Send|Charge|Transfer|Payout)`)

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	decls := map[*types.Func]*ast.FuncDecl{}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					decls[fn] = fd
				}
			}
		}
	}
	vetutil.EnclosingFuncs(pass, func(decl *ast.FuncDecl, body *ast.BlockStmt) {
		keyed := hasKey(pass, decl)
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				fn := vetutil.Callee(pass.TypesInfo, n)
				path := vetutil.FuncPath(fn)
				switch {
				case vetutil.PathIs(path, "github.com/hashicorp/go-retryablehttp"):
					if m := mutation(pass, n, fn); m != "" && fn.Name() != "Do" && !keyed {
						rep.Reportf(n.Pos(), "%s with go-retryablehttp, which retries it, carries no Idempotency-Key: a retry after a lost response applies it twice; derive the key once from the intent and set it on the request (req.Header.Set(\"Idempotency-Key\", key))", m)
					}
				case retrier(fn):
					for _, a := range n.Args {
						var b *ast.BlockStmt
						var inner *ast.FuncDecl
						switch a := ast.Unparen(a).(type) {
						case *ast.FuncLit:
							b = a.Body
						case *ast.Ident, *ast.SelectorExpr:
							switch obj := pass.TypesInfo.ObjectOf(identOf(a)).(type) {
							case *types.Func:
								if decls[obj] != nil {
									inner = decls[obj]
									b = inner.Body
								}
							case *types.Var:
								b = funcLitOf(pass, decl, obj)
							}
						}
						if b == nil || keyed || (inner != nil && hasKey(pass, inner)) {
							continue
						}
						if call, m := findMutation(pass, b, decls, 0); call != nil {
							rep.Reportf(call.Pos(), "%s retried by %s.%s carries no idempotency key: a retry after a lost response applies it twice; derive the key once, outside the retry, and send it on every attempt (Idempotency-Key header, the SDK's IdempotencyKey)", m, pkgName(fn), fn.Name())
						}
					}
				}
			case *ast.ForStmt:
				loop(pass, rep, n.Body, decl, keyed)
			case *ast.RangeStmt:
				loop(pass, rep, n.Body, decl, keyed)
			}
			return true
		})
	})
	return rep.Result, nil
}

func identOf(e ast.Expr) *ast.Ident {
	switch e := e.(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

func pkgName(fn *types.Func) string { return fn.Pkg().Name() }

// retrier reports whether fn runs a function again on failure.
func retrier(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	path := vetutil.FuncPath(fn)
	switch {
	case vetutil.PathIs(path, "github.com/cenkalti/backoff"):
		return strings.HasPrefix(fn.Name(), "Retry")
	case vetutil.PathIs(path, "github.com/avast/retry-go"):
		return fn.Name() == "Do" || fn.Name() == "DoWithData"
	case vetutil.PathIs(path, "github.com/sethvargo/go-retry"):
		switch fn.Name() {
		case "Do", "DoValue", "Constant", "Exponential", "Fibonacci":
			return true
		}
	}
	return false
}

// loop reports a for loop that sleeps or backs off around a mutating
// http.Client.Do.
func loop(pass *analysis.Pass, rep *vetutil.Reporter, body *ast.BlockStmt, decl *ast.FuncDecl, keyed bool) {
	if keyed {
		return
	}
	waits := false
	var do *ast.CallExpr
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := vetutil.Callee(pass.TypesInfo, call)
		switch {
		case vetutil.IsFunc(fn, "time", "Sleep", "After", "NewTimer"):
			waits = true
		case fn != nil && fn.Name() == "NextBackOff":
			waits = true
		case fn != nil && do == nil && vetutil.IsNamed(recvOf(fn), "net/http", "Client"):
			do = call
		}
		return true
	})
	if !waits || do == nil {
		return
	}
	fn := vetutil.Callee(pass.TypesInfo, do)
	if m := mutation(pass, do, fn); m != "" {
		rep.Reportf(do.Pos(), "%s retried by this loop carries no Idempotency-Key: a retry after a lost response applies it twice; derive the key once, before the loop, and set it on the request (req.Header.Set(\"Idempotency-Key\", key))", m)
	}
}

func recvOf(fn *types.Func) types.Type {
	sig := fn.Type().(*types.Signature)
	if sig.Recv() == nil {
		return nil
	}
	return sig.Recv().Type()
}

// funcLitOf finds the function literal a local variable was assigned.
func funcLitOf(pass *analysis.Pass, decl *ast.FuncDecl, v *types.Var) *ast.BlockStmt {
	var b *ast.BlockStmt
	ast.Inspect(decl, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return b == nil
		}
		for i, l := range as.Lhs {
			if id, ok := l.(*ast.Ident); ok && pass.TypesInfo.ObjectOf(id) == v {
				if fl, ok := as.Rhs[i].(*ast.FuncLit); ok {
					b = fl.Body
				}
			}
		}
		return b == nil
	})
	return b
}

// findMutation finds a mutating HTTP request or SDK call in a retried
// body, following calls of the package's own functions one level deep.
func findMutation(pass *analysis.Pass, b *ast.BlockStmt, decls map[*types.Func]*ast.FuncDecl, depth int) (*ast.CallExpr, string) {
	var found *ast.CallExpr
	var what string
	ast.Inspect(b, func(n ast.Node) bool {
		if found != nil {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := vetutil.Callee(pass.TypesInfo, call)
		if m := mutation(pass, call, fn); m != "" {
			found, what = call, m
		} else if d := decls[fn]; d != nil && depth < 1 && !hasKey(pass, d) {
			found, what = findMutation(pass, d.Body, decls, depth+1)
		}
		return true
	})
	return found, what
}

// mutation describes call when it sends a mutating HTTP request or
// calls a provider SDK mutation, else "".
func mutation(pass *analysis.Pass, call *ast.CallExpr, fn *types.Func) string {
	if fn == nil {
		return ""
	}
	path := vetutil.FuncPath(fn)
	name := fn.Name()
	switch {
	case path == "net/http" || vetutil.PathIs(path, "github.com/hashicorp/go-retryablehttp"):
		switch name {
		case "NewRequest", "NewRequestWithContext":
			i := 0
			if name == "NewRequestWithContext" {
				i = 1
			}
			if i < len(call.Args) {
				if m, ok := vetutil.StringConst(pass.TypesInfo, call.Args[i]); ok && vetutil.MutatingMethod(m) {
					return "this " + strings.ToUpper(m)
				}
			}
		case "Post", "PostForm":
			return "this POST"
		case "Do":
			if len(call.Args) == 1 && path == "net/http" {
				if m := requestMethod(pass, call.Args[0]); vetutil.MutatingMethod(m) {
					return "this " + strings.ToUpper(m)
				}
			}
		}
	case strings.Contains(path, "stripe-go") || strings.Contains(path, "adyen-go") || strings.Contains(path, "braintree"):
		if sdkMutation.MatchString(name) && hasKeyParam(pass, call) {
			return "the provider call " + fn.Pkg().Name() + "." + name
		}
	}
	return ""
}

// requestMethod finds the constant method a request variable was built
// with in the same function, or "".
func requestMethod(pass *analysis.Pass, e ast.Expr) string {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return ""
	}
	obj := pass.TypesInfo.ObjectOf(id)
	if obj == nil {
		return ""
	}
	for _, f := range pass.Files {
		if f.Pos() > obj.Pos() || obj.Pos() > f.End() {
			continue
		}
		var method string
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Rhs) != 1 || method != "" {
				return method == ""
			}
			for _, l := range as.Lhs {
				if lid, ok := l.(*ast.Ident); ok && pass.TypesInfo.ObjectOf(lid) == obj {
					if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
						fn := vetutil.Callee(pass.TypesInfo, call)
						if fn != nil && (fn.Name() == "NewRequest" || fn.Name() == "NewRequestWithContext") {
							i := 0
							if fn.Name() == "NewRequestWithContext" {
								i = 1
							}
							if i < len(call.Args) {
								method, _ = vetutil.StringConst(pass.TypesInfo, call.Args[i])
							}
						}
					}
				}
			}
			return true
		})
		return method
	}
	return ""
}

// hasKeyParam reports whether a call passes a parameter struct that has
// an IdempotencyKey field (stripe-go's Params).
func hasKeyParam(pass *analysis.Pass, call *ast.CallExpr) bool {
	for _, a := range call.Args {
		t := pass.TypesInfo.TypeOf(a)
		n := vetutil.NamedOf(t)
		if n == nil {
			continue
		}
		if st, ok := n.Underlying().(*types.Struct); ok {
			obj, _, _ := types.LookupFieldOrMethod(n, true, nil, "IdempotencyKey")
			if _, ok := obj.(*types.Var); ok && st != nil {
				return true
			}
		}
	}
	return false
}

// hasKey reports whether a function sets an idempotency key anywhere: an
// Idempotency-Key header, an IdempotencyKey field or setter, idem's
// forwarded key.
func hasKey(pass *analysis.Pass, decl *ast.FuncDecl) bool {
	found := false
	ast.Inspect(decl, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := vetutil.StringConst(pass.TypesInfo, n); ok && strings.Contains(strings.ToLower(s), "idempotency") {
				found = true
			}
		case *ast.SelectorExpr:
			switch n.Sel.Name {
			case "IdempotencyKey", "SetIdempotencyKey", "ForwardKey", "IdempotencyKeyHeader":
				found = true
			}
		case *ast.Ident:
			if c, ok := pass.TypesInfo.Uses[n].(*types.Const); ok && strings.Contains(strings.ToLower(c.Name()), "idempotency") {
				found = true
			}
		}
		return !found
	})
	return found
}
