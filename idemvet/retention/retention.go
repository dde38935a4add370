// Package retention finds a record TTL shorter than the redelivery windows
// configured in the same program, and consumers without a Cover.
package retention

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/idemvet/internal/vetutil"
)

// Doc explains the finding.
const Doc = `report an idem TTL shorter than a redelivery window, and a consumer without Cover

A record replays only as long as it is kept. A duplicate that arrives after
the TTL is a new intent, and the effect runs again: a 24h TTL against a
queue that redelivers or replays its dead letters for 7 days is a
duplicate waiting to happen. retention compares the TTL of each idem.Config
(24h when unset) with the windows configured in the same package: a
JetStream consumer's redelivery (the sum of BackOff, or MaxDeliver ×
AckWait), a dead-letter stream's MaxAge, an AMQP queue's dead-letter
x-message-ttl, and the Cover windows themselves. It also reports an
idem.Config without Cover in a package that sets up a consumer (AMQP
Consume, a JetStream subscription or consumer, an idem consumer).

Fix: a TTL at least as long as the longest window, and the window named in
Config.Cover so that idem.New refuses a shorter TTL at startup. A
suggested fix adds the Cover when the window is a constant.`

// Analyzer is the retention analyzer.
var Analyzer = &analysis.Analyzer{
	Name:       "retention",
	Doc:        Doc,
	URL:        "https://github.com/idemkit/idem/blob/main/docs/vet.md#retention",
	Run:        run,
	ResultType: vetutil.ResultType,
}

const defaultTTL = 24 * time.Hour

type window struct {
	what string
	d    time.Duration
	pos  token.Pos
}

type config struct {
	lit   *ast.CompositeLit
	ttl   time.Duration
	ttlAt token.Pos
	known bool // ttl is a constant (or the default)
	cover bool
	own   []window // its Cover windows
	file  *ast.File
}

func run(pass *analysis.Pass) (any, error) {
	rep := vetutil.NewReporter(pass)
	var configs []config
	var windows []window
	var consumer token.Pos
	var consumerWhat string
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				t := pass.TypesInfo.TypeOf(n)
				if t == nil {
					return true
				}
				switch {
				case vetutil.IsNamed(t, vetutil.IdemPath, "Config"):
					c := config{lit: n, ttl: defaultTTL, known: true, ttlAt: n.Pos(), file: f}
					for _, el := range n.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						switch key(kv) {
						case "TTL":
							c.ttlAt = kv.Pos()
							c.ttl, c.known = duration(pass, kv.Value)
						case "Cover":
							c.cover = true
							c.own = coverWindows(pass, kv.Value)
						}
					}
					configs = append(configs, c)
				case isNATS(t, "ConsumerConfig"):
					if w, ok := jetstream(pass, n); ok {
						windows = append(windows, w)
					}
					consumer, consumerWhat = first(consumer, consumerWhat, n.Pos(), "a JetStream consumer")
				case isNATS(t, "StreamConfig"):
					if w, ok := deadLetterStream(pass, n); ok {
						windows = append(windows, w)
					}
				case isAMQPTable(t):
					if w, ok := amqpTTL(pass, n); ok {
						windows = append(windows, w)
					}
				}
			case *ast.CallExpr:
				fn := vetutil.Callee(pass.TypesInfo, n)
				if what := consumerCall(fn); what != "" {
					consumer, consumerWhat = first(consumer, consumerWhat, n.Pos(), what)
					if w, ok := subscribeOptions(pass, n); ok {
						windows = append(windows, w)
					}
				}
			}
			return true
		})
	}
	for _, c := range configs {
		if w, ok := longest(append(c.own, windows...)); ok && c.known && c.ttl < w.d {
			{
				{
					rep.Reportf(c.ttlAt, "idem.Config TTL %s is shorter than %s (%s, %s): a redelivery after the record expired runs the effect again; keep records at least that long and name the window in Cover so that idem.New checks it",
						human(c.ttl), w.what, human(w.d), pass.Fset.Position(w.pos))
				}
			}
		}
		if !c.cover && consumer.IsValid() {
			d := analysis.Diagnostic{
				Pos: c.lit.Lbrace,
				Message: fmt.Sprintf("idem.Config has no Cover although this package sets up %s (%s): name the queue's redelivery or dead-letter replay window in Cover so that idem.New refuses a TTL shorter than it",
					consumerWhat, pass.Fset.Position(consumer)),
			}
			if w, ok := longest(windows); ok && imports(c.file, "time") {
				text := fmt.Sprintf("Cover: map[string]time.Duration{%q: %s}", w.name(), goDuration(w.d))
				if len(c.lit.Elts) > 0 {
					text += ", "
				}
				d.SuggestedFixes = []analysis.SuggestedFix{{
					Message:   "name the window in Config.Cover",
					TextEdits: []analysis.TextEdit{{Pos: c.lit.Lbrace + 1, End: c.lit.Lbrace + 1, NewText: []byte(text)}},
				}}
			}
			rep.Report(d)
		}
	}
	return rep.Result, nil
}

func (w window) name() string {
	if i := strings.Index(w.what, " ("); i >= 0 {
		return w.what[:i]
	}
	return w.what
}

func first(cur token.Pos, curWhat string, p token.Pos, what string) (token.Pos, string) {
	if cur.IsValid() {
		return cur, curWhat
	}
	return p, what
}

func longest(ws []window) (window, bool) {
	var best window
	for _, w := range ws {
		if w.d > best.d {
			best = w
		}
	}
	return best, best.d > 0
}

func imports(f *ast.File, path string) bool {
	for _, s := range f.Imports {
		if strings.Trim(s.Path.Value, `"`) == path && (s.Name == nil || s.Name.Name == "time") {
			return true
		}
	}
	return false
}

func key(kv *ast.KeyValueExpr) string {
	if id, ok := kv.Key.(*ast.Ident); ok {
		return id.Name
	}
	if s, ok := kv.Key.(*ast.BasicLit); ok {
		return strings.Trim(s.Value, "\"`")
	}
	return ""
}

func duration(pass *analysis.Pass, e ast.Expr) (time.Duration, bool) {
	n, ok := vetutil.IntConst(pass.TypesInfo, e)
	return time.Duration(n), ok
}

func isNATS(t types.Type, name string) bool {
	return vetutil.IsNamed(t, "github.com/nats-io/nats.go", name) || vetutil.IsNamed(t, "github.com/nats-io/nats.go/jetstream", name)
}

func isAMQPTable(t types.Type) bool {
	return vetutil.IsNamed(t, "github.com/rabbitmq/amqp091-go", "Table") || vetutil.IsNamed(t, "github.com/streadway/amqp", "Table")
}

func coverWindows(pass *analysis.Pass, e ast.Expr) []window {
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []window
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		name, _ := vetutil.StringConst(pass.TypesInfo, kv.Key)
		if d, ok := duration(pass, kv.Value); ok {
			out = append(out, window{what: fmt.Sprintf("the Cover window %q", name), d: d, pos: kv.Pos()})
		}
	}
	return out
}

// jetstream is the redelivery window of a consumer: the sum of its
// BackOff delays (the last one repeated up to MaxDeliver), or MaxDeliver
// × AckWait.
func jetstream(pass *analysis.Pass, lit *ast.CompositeLit) (window, bool) {
	ackWait := 30 * time.Second // the server's default
	var maxDeliver int64
	var backoff []time.Duration
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key(kv) {
		case "AckWait":
			if d, ok := duration(pass, kv.Value); ok {
				ackWait = d
			}
		case "MaxDeliver":
			maxDeliver, _ = vetutil.IntConst(pass.TypesInfo, kv.Value)
		case "BackOff":
			if bl, ok := ast.Unparen(kv.Value).(*ast.CompositeLit); ok {
				for _, b := range bl.Elts {
					if d, ok := duration(pass, b); ok {
						backoff = append(backoff, d)
					}
				}
			}
		}
	}
	if maxDeliver <= 0 {
		return window{}, false // unlimited or unset: no constant window
	}
	if len(backoff) > 0 {
		var total time.Duration
		for i := int64(0); i < maxDeliver-1; i++ {
			if int(i) < len(backoff) {
				total += backoff[i]
			} else {
				total += backoff[len(backoff)-1]
			}
		}
		return window{what: fmt.Sprintf("the JetStream redelivery window (BackOff over MaxDeliver %d)", maxDeliver), d: total, pos: lit.Pos()}, true
	}
	return window{what: fmt.Sprintf("the JetStream redelivery window (MaxDeliver %d × AckWait %s)", maxDeliver, human(ackWait)), d: time.Duration(maxDeliver) * ackWait, pos: lit.Pos()}, true
}

// deadLetterStream is the MaxAge of a stream named like a dead-letter
// queue: how long dead letters can be replayed.
func deadLetterStream(pass *analysis.Pass, lit *ast.CompositeLit) (window, bool) {
	var name string
	var maxAge time.Duration
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key(kv) {
		case "Name":
			name, _ = vetutil.StringConst(pass.TypesInfo, kv.Value)
		case "MaxAge":
			maxAge, _ = duration(pass, kv.Value)
		}
	}
	n := strings.ToLower(name)
	if maxAge <= 0 || !(strings.Contains(n, "dlq") || strings.Contains(n, "dead") || strings.Contains(n, "retry") || strings.Contains(n, "parked")) {
		return window{}, false
	}
	return window{what: fmt.Sprintf("the dead-letter stream %q replay window (MaxAge)", name), d: maxAge, pos: lit.Pos()}, true
}

// amqpTTL is the x-message-ttl of a queue that dead-letters (a delay or
// retry queue): messages come back after it.
func amqpTTL(pass *analysis.Pass, lit *ast.CompositeLit) (window, bool) {
	var ttl time.Duration
	var at token.Pos
	dlx := false
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch k, _ := vetutil.StringConst(pass.TypesInfo, kv.Key); k {
		case "x-message-ttl":
			if ms, ok := vetutil.IntConst(pass.TypesInfo, kv.Value); ok {
				ttl, at = time.Duration(ms)*time.Millisecond, kv.Pos()
			}
		case "x-dead-letter-exchange", "x-dead-letter-routing-key":
			dlx = true
		}
	}
	if !dlx || ttl <= 0 {
		return window{}, false
	}
	return window{what: "the AMQP dead-letter x-message-ttl", d: ttl, pos: at}, true
}

// consumerCall names the consumer a call sets up, or "".
func consumerCall(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	path := fn.Pkg().Path()
	switch {
	case vetutil.PathIs(path, "github.com/rabbitmq/amqp091-go"), vetutil.PathIs(path, "github.com/streadway/amqp"):
		if strings.HasPrefix(fn.Name(), "Consume") {
			return "an AMQP consumer"
		}
	case vetutil.PathUnder(path, "github.com/nats-io/nats.go"):
		switch fn.Name() {
		case "Subscribe", "QueueSubscribe", "PullSubscribe", "ChanSubscribe", "AddConsumer", "CreateConsumer", "CreateOrUpdateConsumer", "Consume":
			if isMethod(fn) {
				return "a NATS consumer"
			}
		}
	case vetutil.PathUnder(path, vetutil.IdemPath+"/consumer"):
		if strings.HasPrefix(fn.Name(), "New") {
			return "an idem consumer"
		}
	}
	return ""
}

func isMethod(fn *types.Func) bool {
	sig := fn.Type().(*types.Signature)
	return sig.Recv() != nil
}

// subscribeOptions is the window of nats.MaxDeliver(n) with
// nats.AckWait(d) among a subscription's options.
func subscribeOptions(pass *analysis.Pass, call *ast.CallExpr) (window, bool) {
	var n int64
	ack := 30 * time.Second
	for _, a := range call.Args {
		c, ok := ast.Unparen(a).(*ast.CallExpr)
		if !ok || len(c.Args) != 1 {
			continue
		}
		fn := vetutil.Callee(pass.TypesInfo, c)
		if fn == nil || !vetutil.PathUnder(vetutil.FuncPath(fn), "github.com/nats-io/nats.go") {
			continue
		}
		switch fn.Name() {
		case "MaxDeliver":
			n, _ = vetutil.IntConst(pass.TypesInfo, c.Args[0])
		case "AckWait":
			if d, ok := duration(pass, c.Args[0]); ok {
				ack = d
			}
		}
	}
	if n <= 0 {
		return window{}, false
	}
	return window{what: fmt.Sprintf("the JetStream redelivery window (MaxDeliver %d × AckWait %s)", n, human(ack)), d: time.Duration(n) * ack, pos: call.Pos()}, true
}

// human prints a duration in days when it is whole days.
func human(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// goDuration writes d as a Go expression.
func goDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d * 24 * time.Hour", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d * time.Hour", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d * time.Minute", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d * time.Second", d/time.Second)
	}
	return fmt.Sprintf("time.Duration(%d)", int64(d))
}
