// Package keyentropy finds idempotency keys made from a fresh random value,
// the clock or a counter.
package keyentropy

import (
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report idempotency keys built from uuid, random values, the clock or a counter

An idempotency key must be the same on every retry of one intent. A key
made from uuid.New(), crypto/rand, math/rand, time.Now() or a counter is
new on every attempt, so every retry is a new intent: the duplicate the key
was meant to stop runs again. keyentropy follows values (through local
variables, fmt.Sprintf and the like, and small helper functions of the same
package) into idem.DeriveKey, idem.ParseKey, an idem.Key conversion, the
Key of an idem.Request, an Idempotency-Key header set on an outgoing
request, and a provider SDK's IdempotencyKey field (stripe-go Params).

Fix: take the key from the request that carries the intent
(r.Header.Get("Idempotency-Key"), a message id) or derive it from immutable
stored ids: idem.DeriveKey("charge", 1, order.ID, order.PaymentAttemptID).`

// Analyzer is the keyentropy analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "keyentropy",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#keyentropy",
	Run:        run,
	ResultType: vetutil.ResultType,
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	prog := buildSSA(pass)
	t := &tracer{pkg: prog.Pkg, counters: counterGlobals(prog)}
	for _, fn := range prog.SrcFuncs {
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				v, what, pos := sink(in)
				if v == nil {
					continue
				}
				src := t.trace(v, 0, map[ssa.Value]bool{})
				if src == nil || src.param >= 0 {
					continue
				}
				if !pos.IsValid() {
					pos = src.pos
				}
				rep.Reportf(pos, "%s is built from %s: the key is new on every attempt, so a retry is a new intent; take it from the request (Idempotency-Key header, message id) or derive it from stored ids (idem.DeriveKey(\"charge\", 1, order.ID, attempt.ID))", what, src.what)
			}
		}
	}
	return rep.Result, nil
}

// sink returns the value an instruction makes into an idempotency key.
func sink(in ssa.Instruction) (ssa.Value, string, token.Pos) {
	switch in := in.(type) {
	case ssa.CallInstruction:
		c := in.Common()
		fn := c.StaticCallee()
		if fn != nil && fn.Object() != nil {
			obj, _ := fn.Object().(*types.Func)
			switch {
			case vetutil.IsFunc(obj, vetutil.IdemPath, "ParseKey", "ValidateKey"):
				return c.Args[0], "the key given to idem." + obj.Name(), in.Pos()
			case vetutil.IsFunc(obj, vetutil.IdemPath, "DeriveKey", "MustDeriveKey"):
				if len(c.Args) == 3 {
					return c.Args[2], "the key derived by idem." + obj.Name(), in.Pos()
				}
			}
			// Header.Set / Header.Add on a request's header.
			if obj != nil && (obj.Name() == "Set" || obj.Name() == "Add") && vetutil.IsNamed(recvType(obj), "net/http", "Header") && len(c.Args) == 3 {
				if k, ok := c.Args[1].(*ssa.Const); ok && k.Value != nil && vetutil.IsKeyHeader(strings.Trim(k.Value.ExactString(), `"`)) && !responseHeader(c.Args[0]) {
					return c.Args[2], "the Idempotency-Key header", in.Pos()
				}
			}
			// SetIdempotencyKey(x) of a provider SDK.
			if obj != nil && obj.Name() == "SetIdempotencyKey" && len(c.Args) == 2 {
				return c.Args[1], "the provider idempotency key", in.Pos()
			}
		}
	case *ssa.Store:
		fa, ok := in.Addr.(*ssa.FieldAddr)
		if !ok {
			return nil, "", token.NoPos
		}
		st, ok := fa.X.Type().Underlying().(*types.Pointer).Elem().Underlying().(*types.Struct)
		if !ok {
			return nil, "", token.NoPos
		}
		f := st.Field(fa.Field)
		switch {
		case f.Name() == "Key" && vetutil.IsNamed(fa.X.Type(), vetutil.IdemPath, "Request"):
			return in.Val, "the idem.Request key", in.Pos()
		case f.Name() == "IdempotencyKey" || f.Name() == "IdempotencyToken":
			return in.Val, "the provider's " + f.Name(), in.Pos()
		}
	}
	return nil, "", token.NoPos
}

func recvType(fn *types.Func) types.Type {
	sig := fn.Type().(*types.Signature)
	if sig.Recv() == nil {
		return nil
	}
	return sig.Recv().Type()
}

// responseHeader reports whether h is w.Header() of an http.ResponseWriter.
func responseHeader(h ssa.Value) bool {
	call, ok := h.(*ssa.Call)
	if !ok {
		return false
	}
	if m := call.Call.Method; m != nil {
		return m.Name() == "Header" && vetutil.IsNamed(call.Call.Value.Type(), "net/http", "ResponseWriter")
	}
	return false
}

type source struct {
	what  string
	pos   token.Pos
	param int // >= 0: the value is the helper's parameter param, not a source
}

type tracer struct {
	pkg      *ssa.Package
	counters map[*ssa.Global]token.Pos
}

const maxDepth = 3

// trace returns the entropy source v is built from, or nil.
func (t *tracer) trace(v ssa.Value, depth int, seen map[ssa.Value]bool) *source {
	if v == nil || seen[v] {
		return nil
	}
	seen[v] = true
	switch v := v.(type) {
	case *ssa.Parameter:
		fn := v.Parent()
		for i, p := range fn.Params {
			if p == v {
				return &source{param: i}
			}
		}
	case *ssa.Call:
		return t.call(v, &v.Call, depth, seen)
	case *ssa.Extract:
		if c, ok := v.Tuple.(*ssa.Call); ok {
			return t.call(c, &c.Call, depth, seen)
		}
	case *ssa.Phi:
		return t.first(v.Edges, depth, seen)
	case *ssa.BinOp:
		return t.first([]ssa.Value{v.X, v.Y}, depth, seen)
	case *ssa.Convert:
		return t.trace(v.X, depth, seen)
	case *ssa.ChangeType:
		return t.trace(v.X, depth, seen)
	case *ssa.MakeInterface:
		return t.trace(v.X, depth, seen)
	case *ssa.Slice:
		return t.trace(v.X, depth, seen)
	case *ssa.TypeAssert:
		return t.trace(v.X, depth, seen)
	case *ssa.UnOp:
		if v.Op == token.MUL {
			switch x := v.X.(type) {
			case *ssa.Global:
				if p, ok := t.counters[x]; ok {
					return &source{what: "the counter " + x.Name(), pos: p, param: -1}
				}
			case *ssa.Alloc:
				return t.trace(x, depth, seen)
			}
		}
	case *ssa.Alloc:
		return t.alloc(v, depth, seen)
	}
	return nil
}

// first traces vals and returns the first real source among them, or
// else the first parameter they come from.
func (t *tracer) first(vals []ssa.Value, depth int, seen map[ssa.Value]bool) *source {
	var param *source
	for _, v := range vals {
		s := t.trace(v, depth, seen)
		switch {
		case s == nil:
		case s.param < 0:
			return s
		case param == nil:
			param = s
		}
	}
	return param
}

// alloc traces what is stored into a local variable or array (the
// variadic slice of fmt.Sprintf, a buffer filled by crypto/rand.Read).
func (t *tracer) alloc(a *ssa.Alloc, depth int, seen map[ssa.Value]bool) *source {
	refs := a.Referrers()
	if refs == nil {
		return nil
	}
	var stored []ssa.Value
	for _, r := range *refs {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Addr == a {
				stored = append(stored, r.Val)
			}
		case *ssa.IndexAddr:
			if r.X != a || r.Referrers() == nil {
				continue
			}
			for _, rr := range *r.Referrers() {
				if st, ok := rr.(*ssa.Store); ok && st.Addr == r {
					stored = append(stored, st.Val)
				}
			}
		case *ssa.Slice:
			if r.Referrers() == nil {
				continue
			}
			for _, rr := range *r.Referrers() {
				if c, ok := rr.(ssa.CallInstruction); ok {
					if s := randRead(c.Common()); s != nil {
						s.pos = c.Pos()
						return s
					}
				}
			}
		}
	}
	return t.first(stored, depth, seen)
}

func randRead(c *ssa.CallCommon) *source {
	fn := c.StaticCallee()
	if fn == nil || fn.Pkg == nil {
		return nil
	}
	path := fn.Pkg.Pkg.Path()
	switch {
	case (path == "crypto/rand" || path == "math/rand") && fn.Name() == "Read":
		return &source{what: path + ".Read", param: -1}
	case path == "io" && fn.Name() == "ReadFull" && len(c.Args) > 0:
		if u, ok := c.Args[0].(*ssa.UnOp); ok {
			if g, ok := u.X.(*ssa.Global); ok && g.Pkg.Pkg.Path() == "crypto/rand" {
				return &source{what: "crypto/rand.Reader", param: -1}
			}
		}
	}
	return nil
}

// randomPackages are the packages every function of which (named New…,
// or any, for the rand packages) makes a fresh value.
func entropyFunc(path, name string) bool {
	switch {
	case vetutil.PathIs(path, "github.com/google/uuid"), vetutil.PathIs(path, "github.com/gofrs/uuid"),
		vetutil.PathIs(path, "github.com/satori/go.uuid"), vetutil.PathIs(path, "github.com/oklog/ulid"),
		vetutil.PathIs(path, "github.com/rs/xid"), vetutil.PathIs(path, "github.com/segmentio/ksuid"):
		return strings.HasPrefix(name, "New") || name == "Make"
	case path == "math/rand", path == "math/rand/v2", path == "crypto/rand":
		return name != "Read" && name != "New" && name != "NewSource" && name != "NewPCG" && name != "NewChaCha8" && name != "NewZipf"
	case path == "time":
		return name == "Now"
	case path == "sync/atomic":
		return strings.HasPrefix(name, "Add")
	}
	return false
}

// passThrough are packages whose functions transform their arguments
// without adding an identity: a random argument gives a random result.
func passThrough(path, name string) bool {
	switch path {
	case "fmt", "strings", "strconv", "bytes", "encoding/hex", "encoding/base64", "encoding/base32",
		"crypto/sha256", "crypto/sha1", "crypto/sha512", "crypto/md5", "hash/fnv", "path", "net/url":
		return true
	}
	if name == "Must" {
		return true // uuid.Must(uuid.NewRandom())
	}
	return false
}

func (t *tracer) call(v ssa.Value, c *ssa.CallCommon, depth int, seen map[ssa.Value]bool) *source {
	if c.IsInvoke() {
		if m := c.Method; m != nil && m.Name() == "String" {
			return t.trace(c.Value, depth, seen)
		}
		return nil
	}
	fn := c.StaticCallee()
	if fn == nil {
		return nil
	}
	var path string
	if fn.Pkg != nil {
		path = fn.Pkg.Pkg.Path()
	} else if fn.Object() != nil && fn.Object().Pkg() != nil {
		path = fn.Object().Pkg().Path() // a generic instance or a method
	}
	if obj, ok := fn.Object().(*types.Func); ok {
		if sig := obj.Type().(*types.Signature); sig.Recv() != nil {
			// A method of a random or clock value (u.String(), t.Unix(),
			// r.Intn(n)) carries the receiver's entropy.
			if p := obj.Pkg(); p != nil && entropyRecv(p.Path(), sig.Recv().Type()) {
				if s := t.trace(c.Args[0], depth, seen); s != nil {
					return s
				}
				if strings.HasPrefix(p.Path(), "math/rand") || p.Path() == "sync/atomic" && obj.Name() == "Add" {
					return &source{what: p.Path() + "." + obj.Name(), pos: v.Pos(), param: -1}
				}
			}
			return nil
		}
	}
	if entropyFunc(path, fn.Name()) {
		return &source{what: shortPath(path) + "." + fn.Name() + "()", pos: v.Pos(), param: -1}
	}
	if passThrough(path, fn.Name()) || pointerHelper(fn) {
		return t.first(c.Args, depth, seen)
	}
	if fn.Pkg == t.pkg && len(fn.Blocks) > 0 && depth < maxDepth {
		return t.helper(fn, c, v, depth, seen)
	}
	return nil
}

// helper traces the results of a function of the same package.
func (t *tracer) helper(fn *ssa.Function, c *ssa.CallCommon, v ssa.Value, depth int, seen map[ssa.Value]bool) *source {
	idx := 0
	if e, ok := v.(*ssa.Extract); ok {
		idx = e.Index
	}
	for _, b := range fn.Blocks {
		ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return)
		if !ok || idx >= len(ret.Results) {
			continue
		}
		s := t.trace(ret.Results[idx], depth+1, map[ssa.Value]bool{})
		if s == nil {
			continue
		}
		if s.param >= 0 {
			if s.param < len(c.Args) {
				if s2 := t.trace(c.Args[s.param], depth, seen); s2 != nil {
					return s2
				}
			}
			continue
		}
		return &source{what: s.what + " (in " + fn.Name() + ")", pos: s.pos, param: -1}
	}
	return nil
}

func entropyRecv(path string, recv types.Type) bool {
	switch {
	case vetutil.PathIs(path, "github.com/google/uuid"), vetutil.PathIs(path, "github.com/gofrs/uuid"),
		vetutil.PathIs(path, "github.com/satori/go.uuid"), vetutil.PathIs(path, "github.com/oklog/ulid"),
		vetutil.PathIs(path, "github.com/rs/xid"), vetutil.PathIs(path, "github.com/segmentio/ksuid"),
		path == "time", path == "math/rand", path == "math/rand/v2", path == "sync/atomic":
		return true
	}
	return false
}

// pointerHelper reports whether fn has the shape func(T) *T of
// stripe.String, aws.String or a generic ptr helper.
func pointerHelper(fn *ssa.Function) bool {
	sig := fn.Signature
	if sig.Params().Len() != 1 || sig.Results().Len() != 1 {
		return false
	}
	p, ok := sig.Results().At(0).Type().(*types.Pointer)
	return ok && types.Identical(p.Elem(), sig.Params().At(0).Type())
}

func shortPath(p string) string {
	switch {
	case strings.Contains(p, "uuid"):
		return "uuid"
	case p == "math/rand/v2":
		return "rand/v2"
	}
	if i := strings.LastIndex(p, "/"); i >= 0 && p != "crypto/rand" && p != "math/rand" {
		return p[i+1:]
	}
	return p
}

// counterGlobals finds package-level integers that the package increments.
func counterGlobals(prog *program) map[*ssa.Global]token.Pos {
	out := map[*ssa.Global]token.Pos{}
	for _, fn := range prog.SrcFuncs {
		for _, b := range fn.Blocks {
			for _, in := range b.Instrs {
				st, ok := in.(*ssa.Store)
				if !ok {
					continue
				}
				g, ok := st.Addr.(*ssa.Global)
				if !ok {
					continue
				}
				if bin, ok := st.Val.(*ssa.BinOp); ok && bin.Op == token.ADD {
					if u, ok := bin.X.(*ssa.UnOp); ok && u.X == g {
						out[g] = st.Pos()
					}
				}
			}
		}
	}
	return out
}
