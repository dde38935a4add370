package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// cmdVersion prints the module version, the commit and the Go version the
// binary was built with, from its build information.
func cmdVersion(_ context.Context, e *env, args []string) int {
	f := e.newFlags("version", "idem version",
		"Print idem's module version, the commit it was built from and the Go version.",
		"idem version")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	printVersion(e.stdout)
	return exitOK
}

func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(w, "idem (no build information)")
		return
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	fmt.Fprintf(w, "idem %s\n", version)
	if rev != "" {
		fmt.Fprintf(w, "commit %s%s %s\n", rev, modified, at)
	} else {
		fmt.Fprintln(w, "commit unknown (built without version control information, e.g. by go run or go test)")
	}
	fmt.Fprintf(w, "%s %s/%s\n", bi.GoVersion, goos, goarch)
}
