package bench

import (
	"fmt"
	"io"
	"strings"
)

// progress writes one line that is rewritten as cells run on a terminal;
// elsewhere (a log, a pipe: ProgressPlain) one plain line per finished
// cell, with no carriage returns.
type progress struct {
	w          io.Writer
	plain      bool
	total, cur int
	dirty      bool
}

func newProgress(opt Options) *progress {
	p := &progress{w: opt.Progress, plain: opt.ProgressPlain}
	for _, sc := range opt.Scenarios {
		if sc != ScenarioWaiters {
			p.total += len(sidesOf(sc)) * len(opt.Concurrency) * max(1, len(opt.Prefill))
		}
	}
	return p
}

func (p *progress) print(s string) {
	if p.w == nil {
		return
	}
	if p.plain {
		fmt.Fprintln(p.w, strings.TrimRight(s, " "))
		return
	}
	fmt.Fprintf(p.w, "\r%-78s", s)
	p.dirty = true
}

func (p *progress) line(format string, a ...any) { p.print(fmt.Sprintf(format, a...)) }

func (p *progress) start(sc, side string, c int) {
	p.cur++
	if p.plain {
		return // the finished cell's line says it all
	}
	p.print(fmt.Sprintf("[%d/%d] %-7s %-10s c=%-4d measuring…", p.cur, p.total, sc, side, c))
}

func (p *progress) finish(cell Cell) {
	p.print(fmt.Sprintf("[%d/%d] %-7s %-10s c=%-4d %s/s p99 %s", p.cur, p.total, cell.Scenario, cell.Side,
		cell.Concurrency, strings.TrimSpace(rate(cell.OpsPerSec)), msString(cell.P99)))
}

func (p *progress) done() {
	if p.w != nil && p.dirty {
		fmt.Fprintf(p.w, "\r%-78s\r", "")
	}
}
