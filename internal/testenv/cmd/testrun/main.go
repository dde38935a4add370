// Command testrun reads the output of `go test -json` on its standard input
// and tells the truth about the run: a line per package as it finishes
// (with its module's progress), a note every half minute naming what is
// still running, and at the end the failures, the slowest packages, every
// skipped backend with the reason, and the tests skipped by design.
//
// scripts/test, the README's test command, pipes its go test into it:
//
//	go test -race -json ./... | go run ./internal/testenv/cmd/testrun -modules "$(scripts/modules)"
//
// (scripts/test also fails when go test exits non-zero with nothing in
// its events to say why.)
//
// It exits 1 when a test or a build failed, or when a backend was skipped — a test skipped with
// a message starting "SKIP: ", the form internal/testenv gives a service
// it could not reach — unless IDEM_ALLOW_SKIP=1. Tests skipped by design
// (under the race detector, children of a crash test, long runs behind a
// flag) are listed by reason but do not fail the run.
//
// The raw events are written to the file -log names, so a failure can be
// read in full afterwards.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	var (
		modulePath = flag.String("module-prefix", "github.com/idemkit/idem", "import path of the repository's root module")
		modules    = flag.String("modules", "", "the repository's module directories, one a line or space-separated (scripts/modules)")
		logFile    = flag.String("log", "", "write the raw go test -json events to this file")
		every      = flag.Duration("every", 30*time.Second, "how often to name the packages still running")
	)
	flag.Parse()

	var raw io.Writer = io.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testrun: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		raw = f
	}

	r := newReport(os.Stdout, *modulePath, strings.Fields(*modules))
	r.allowSkip = os.Getenv("IDEM_ALLOW_SKIP") == "1"

	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			b := append([]byte(nil), sc.Bytes()...)
			raw.Write(append(b, '\n'))
			lines <- b
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "testrun: reading go test's output: %v\n", err)
		}
		close(lines)
	}()

	tick := time.NewTicker(*every)
	defer tick.Stop()
loop:
	for {
		select {
		case b, ok := <-lines:
			if !ok {
				break loop
			}
			r.line(b)
		case now := <-tick.C:
			r.progress(now)
		}
	}
	if *logFile != "" {
		r.logFile = *logFile
	}
	os.Exit(r.finish())
}
