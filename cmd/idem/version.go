package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X by scripts/build, for builds that carry no version
// control information of their own (a Go workspace in a git worktree, or
// GOFLAGS=-buildvcs=false): the commit, its time (RFC 3339) and "true"
// when the tree had uncommitted changes. The build information wins when
// it has a revision.
var (
	buildCommit   string
	buildTime     string
	buildModified string
)

// versionInfo is what `idem version` prints; --json prints it as is.
type versionInfo struct {
	// Version is the main module's version: a tag (v1.2.3) or pseudo-version
	// for `go install …@version` and builds in a tagged checkout,
	// "(devel)" otherwise.
	Version string `json:"version"`
	// Commit is the revision the binary was built from, "" when unknown;
	// CommitTime its time and Modified whether the tree had changes.
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	// GoVersion is the toolchain's (go1.26.8), Platform GOOS/GOARCH.
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// Modules lists the modules linked in, the main one first.
	Modules []moduleInfo `json:"modules"`
}

// moduleInfo is one module of the binary.
type moduleInfo struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Replace is the module's replacement (a directory in a workspace).
	Replace string `json:"replace,omitempty"`
}

// cmdVersion prints the module version, the commit and the Go version the
// binary was built with, from its build information.
func cmdVersion(_ context.Context, e *env, args []string) int {
	f := e.newFlags("version", "idem version [--json]",
		"Print idem's module version, the commit it was built from and the Go version;\n"+
			"with --json also every module linked in.",
		"idem version --json")
	asJSON := f.Bool("json", false, "print version, commit, commit_time, modified, go_version, platform and modules as one JSON object (see docs/cli.md)")
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	v := readVersion()
	if *asJSON {
		return writeJSON(f, e.stdout, v)
	}
	printVersion(e.stdout, v)
	return exitOK
}

// readVersion reads the binary's build information, and the values
// scripts/build stamps where it has no revision.
func readVersion() versionInfo {
	v := versionInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		v.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		v.Modules = append(v.Modules, module(&bi.Main))
		for _, d := range bi.Deps {
			v.Modules = append(v.Modules, module(d))
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Commit == "" && buildCommit != "" {
		v.Commit, v.CommitTime, v.Modified = buildCommit, buildTime, buildModified == "true"
	}
	return v
}

func module(m *debug.Module) moduleInfo {
	mi := moduleInfo{Path: m.Path, Version: m.Version}
	if m.Replace != nil {
		mi.Replace = m.Replace.Path
		if m.Replace.Version != "" {
			mi.Replace += "@" + m.Replace.Version
		}
	}
	return mi
}

func printVersion(w io.Writer, v versionInfo) {
	fmt.Fprintf(w, "idem %s\n", v.Version)
	if v.Commit != "" {
		modified := ""
		if v.Modified {
			modified = " (modified)"
		}
		fmt.Fprintf(w, "commit %s%s %s\n", v.Commit, modified, v.CommitTime)
	} else if v.Version != "(devel)" {
		// go install …@version: the module version names the release.
		fmt.Fprintf(w, "commit of the tag %s (installed from a module proxy, which keeps no commit)\n", v.Version)
	} else {
		fmt.Fprintln(w, "commit unknown (built without version control information, e.g. by go run or go test; scripts/build stamps it)")
	}
	fmt.Fprintf(w, "%s %s\n", v.GoVersion, v.Platform)
}
