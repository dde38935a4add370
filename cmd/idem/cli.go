package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/durations"
	"github.com/idemkit/idem/internal/httpsyntax"
)

// flags is one command's flag set with its usage text.
type flags struct {
	*flag.FlagSet
	e        *env
	synopsis string
	about    string
	example  string
}

func (e *env) newFlags(name, synopsis, about, example string) *flags {
	fs := flag.NewFlagSet("idem "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself, in one line
	fs.Usage = func() {}
	return &flags{FlagSet: fs, e: e, synopsis: synopsis, about: about, example: example}
}

// usage prints the command's full help: synopsis, what it does, its flags
// in --flag form, and an example.
func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", f.synopsis, f.about)
	f.VisitAll(func(fl *flag.Flag) {
		name, usage := flag.UnquoteUsage(fl)
		switch fl.Value.(type) {
		case durationFlag:
			name = "DUR"
		case coverFlag:
			name = "NAME=DUR"
		}
		line := "  --" + fl.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && fl.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\nexample:\n  %s\n", f.example)
}

// parse parses args with flags allowed before and after positional
// arguments. ok is false when the command must exit with code: 0 after
// --help, 2 after a bad flag.
func (f *flags) parse(args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterspersed(f.FlagSet, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.usage(f.e.stdout)
		return nil, exitOK, false
	case err != nil:
		return nil, f.usageError("%s", dashDash(err.Error())), false
	}
	return pos, 0, true
}

// dashDash rewrites the flag package's "-name" in its messages as the
// "--name" this CLI documents.
func dashDash(msg string) string {
	msg = strings.Replace(msg, "for flag -", "for flag --", 1) // invalid value "x" for flag -name: …
	return strings.Replace(msg, ": -", ": --", 1)
}

// usageError reports a usage mistake in one line and says where the help
// is; it does not print the whole help.
func (f *flags) usageError(format string, a ...any) int {
	fmt.Fprintf(f.e.stderr, "%s: %s\nRun '%s --help' for usage.\n", f.Name(), userText(fmt.Sprintf(format, a...)), f.Name())
	return exitUsage
}

// fail reports a runtime failure.
func (f *flags) fail(err error) int {
	fmt.Fprintf(f.e.stderr, "%s: %s\n", f.Name(), userText(err.Error()))
	return exitFailure
}

// packagePrefixes are the "package: " prefixes Go errors from idem's
// libraries carry. An operator reads about their store, file or record, not
// about which package noticed: userText drops them.
var packagePrefixes = []string{
	"storeopen: ", "sqlitestore: ", "pgstore: ", "mysqlstore: ", "redisstore: ", "memstore: ",
	"csvprovider: ", "httpprovider: ", "reconcile: ", "idemhttp: ", "idemprom: ", "idem: ",
}

func userText(msg string) string {
	for _, p := range packagePrefixes {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// parseInterspersed parses flags that may appear anywhere among the
// positional arguments. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseDuration is durations.Parse: time.ParseDuration plus a "d" (24h)
// unit, e.g. "30d" or "1d12h", refusing negative and overflowing values.
func parseDuration(s string) (time.Duration, error) { return durations.Parse(s) }

// durationFlag is a flag.Value accepting parseDuration's syntax.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (f *flags) duration(name string, def time.Duration, usage string) *time.Duration {
	d := def
	f.Var(durationFlag{&d}, name, usage)
	return &d
}

// listFlag collects a repeatable flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// coverFlag collects repeated --cover NAME=DUR.
type coverFlag map[string]time.Duration

func (c coverFlag) String() string { return "" }

func (c coverFlag) Set(s string) error {
	name, dur, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=DURATION, got %q", s)
	}
	d, err := parseDuration(dur)
	if err != nil {
		return err
	}
	if _, dup := c[name]; dup {
		return fmt.Errorf("window %q given twice", name)
	}
	c[name] = d
	return nil
}

// parseStatusList parses "429,503".
func parseStatusList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Errorf("%q is not an HTTP status", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2):
// the syntax of a method and of a header field name.
func isToken(s string) bool { return httpsyntax.IsToken(s) }

// storeDSNs lists the store DSN forms, for every --store flag's help.
const storeDSNs = "sqlite://PATH, postgres://…, mysql://…, redis://…, redis+cluster://…, redis+sentinel://…, nats://…/BUCKET, dynamodb://TABLE?region=…, memory://"
