// Package unkeyedtool finds MCP tools that may have side effects and take
// no idempotency key.
package unkeyedtool

import (
	"go/ast"
	"go/types"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report MCP tools without ReadOnlyHint whose input has no idempotency key

Agents retry tool calls: after a timeout, after the model re-plans, after
the host restarts. A tool that refunds, emails or books does it again,
because nothing in the call says it is the same action. unkeyedtool
reports a tool added with the official Go SDK (mcp.AddTool or
Server.AddTool) that is not marked ReadOnlyHint or IdempotentHint, whose
input has no idempotency key field (a json name containing
"idempotency"), and that is not registered through idemmcp.

Fix: register side-effecting tools with idemmcp.AddTool(guard, tool,
handler), which adds a required idempotency_key and runs the handler once
per key; mark read-only tools Annotations: &mcp.ToolAnnotations{
ReadOnlyHint: true}.`

// Analyzer is the unkeyedtool analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "unkeyedtool",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#unkeyedtool",
	Run:        run,
	ResultType: vetutil.ResultType,
}

const sdk = "github.com/modelcontextprotocol/go-sdk/mcp"

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	vetutil.EnclosingFuncs(pass, func(decl *ast.FuncDecl, body *ast.BlockStmt) {
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := vetutil.Callee(pass.TypesInfo, call)
			if fn == nil || fn.Name() != "AddTool" || !vetutil.PathIs(vetutil.FuncPath(fn), sdk) {
				return true
			}
			var toolArg ast.Expr
			generic := vetutil.RecvNamed(fn) == nil
			if generic && len(call.Args) == 3 {
				toolArg = call.Args[1]
			} else if !generic && len(call.Args) == 2 {
				toolArg = call.Args[0]
			} else {
				return true
			}
			lit := toolLiteral(pass, decl, toolArg)
			if lit == nil {
				return true // built elsewhere: not judged
			}
			name := "?"
			var schema ast.Expr
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch id, _ := kv.Key.(*ast.Ident); {
				case id == nil:
				case id.Name == "Name":
					if s, ok := vetutil.StringConst(pass.TypesInfo, kv.Value); ok {
						name = s
					}
				case id.Name == "Annotations":
					if safe, known := annotated(pass, kv.Value); safe || !known {
						return true
					}
				case id.Name == "InputSchema":
					schema = kv.Value
				}
			}
			switch {
			case schema != nil:
				has, known := schemaHasKey(pass, schema)
				if has || !known {
					return true
				}
			case generic:
				if inputHasKey(pass, call) {
					return true
				}
			default:
				return true
			}
			rep.Reportf(call.Pos(), "MCP tool %q has no ReadOnlyHint and no idempotency key in its input: agents retry tool calls, and the side effect runs again; register it with idemmcp.AddTool (a required idempotency_key, one run per key) or mark it ReadOnlyHint if it changes nothing", name)
			return true
		})
	})
	return rep.Result, nil
}

// toolLiteral finds the mcp.Tool composite literal a tool argument is.
func toolLiteral(pass *analysis.Pass, decl *ast.FuncDecl, e ast.Expr) *ast.CompositeLit {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	if lit, ok := e.(*ast.CompositeLit); ok {
		return lit
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	obj := pass.TypesInfo.ObjectOf(id)
	var found *ast.CompositeLit
	ast.Inspect(decl, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return found == nil
		}
		for i, l := range as.Lhs {
			if lid, ok := l.(*ast.Ident); ok && pass.TypesInfo.ObjectOf(lid) == obj {
				found = toolLiteral(pass, decl, as.Rhs[i])
			}
		}
		return found == nil
	})
	return found
}

// literal is the composite literal e is, or points to (&T{…}), or nil.
func literal(e ast.Expr) *ast.CompositeLit {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	lit, _ := e.(*ast.CompositeLit)
	return lit
}

// annotated reports whether annotations mark a tool read-only or
// idempotent; known is false when they are not a literal.
func annotated(pass *analysis.Pass, e ast.Expr) (safe, known bool) {
	lit := literal(e)
	if lit == nil {
		return false, false
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		id, _ := kv.Key.(*ast.Ident)
		if id == nil || (id.Name != "ReadOnlyHint" && id.Name != "IdempotentHint") {
			continue
		}
		tv := pass.TypesInfo.Types[kv.Value]
		if tv.Value == nil {
			return false, false // not a constant
		}
		if tv.Value.ExactString() == "true" {
			return true, true
		}
	}
	return false, true
}

// schemaHasKey looks for an idempotency property in a literal schema.
func schemaHasKey(pass *analysis.Pass, e ast.Expr) (has, known bool) {
	lit := literal(e)
	if lit == nil {
		return false, false
	}
	known = true
	ast.Inspect(lit, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if s, ok := vetutil.StringConst(pass.TypesInfo, kv.Key); ok && isKeyName(s) {
				has = true
			}
		}
		if bl, ok := n.(*ast.BasicLit); ok {
			if s, err := strconv.Unquote(bl.Value); err == nil && isKeyName(s) {
				has = true
			}
		}
		return !has
	})
	return has, known
}

func isKeyName(s string) bool { return strings.Contains(strings.ToLower(s), "idempotency") }

// inputHasKey reports whether the In type of a generic mcp.AddTool has an
// idempotency key field.
func inputHasKey(pass *analysis.Pass, call *ast.CallExpr) bool {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	if ix, ok := fun.(*ast.IndexExpr); ok {
		fun = ix.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	}
	inst, ok := pass.TypesInfo.Instances[id]
	if !ok || inst.TypeArgs.Len() < 1 {
		return true // unknown: not judged
	}
	in := inst.TypeArgs.At(0)
	if p, ok := in.Underlying().(*types.Pointer); ok {
		in = p.Elem()
	}
	st, ok := in.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		tag := reflect.StructTag(st.Tag(i)).Get("json")
		if isKeyName(f.Name()) || isKeyName(strings.Split(tag, ",")[0]) {
			return true
		}
	}
	return false
}
