package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// qsStep is one command of the README's quick start, with the output lines
// the README shows under it.
type qsStep struct {
	cmd        string
	background bool     // it ends in "&": a server the rest talks to
	want       []string // "# …" lines after it, without "#" and the "<- remark"
}

// readmeQuickStart returns the commands of the shell blocks of README.md's
// "## Quick start" section, in order.
func readmeQuickStart(t *testing.T) []qsStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Quick start\n")
	if i < 0 {
		t.Fatal("README.md has no ## Quick start section")
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	var steps []qsStep
	for {
		start := strings.Index(s, "```sh\n")
		if start < 0 {
			break
		}
		s = s[start+len("```sh\n"):]
		end := strings.Index(s, "```")
		if end < 0 {
			t.Fatal("README.md: a shell block of the quick start is not closed")
		}
		block := s[:end]
		s = s[end+3:]
		var cmd string
		for _, line := range strings.Split(block, "\n") {
			switch {
			case cmd != "": // a continuation line
				cmd += "\n" + line
			case strings.HasPrefix(line, "#"):
				if len(steps) == 0 {
					t.Fatalf("README.md: output line %q follows no command", line)
				}
				want := strings.TrimPrefix(line, "#")
				want, _, _ = strings.Cut(want, "<-")
				if want = strings.TrimSpace(want); want != "" {
					steps[len(steps)-1].want = append(steps[len(steps)-1].want, want)
				}
				continue
			case strings.TrimSpace(line) == "":
				continue
			default:
				cmd = line
			}
			if strings.HasSuffix(cmd, "\\") {
				continue
			}
			st := qsStep{cmd: strings.TrimSpace(cmd)}
			if c, ok := strings.CutSuffix(st.cmd, "&"); ok {
				st.cmd, st.background = strings.TrimSpace(c), true
			}
			steps = append(steps, st)
			cmd = ""
		}
		if cmd != "" {
			t.Fatalf("README.md: the quick start's command %q ends in a continuation", cmd)
		}
	}
	return steps
}

// outputHas reports whether one line of out holds the words of want in
// order ("…" stands for anything).
func outputHas(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, w := range strings.Fields(want) {
			if w == "…" || w == "..." {
				continue
			}
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestREADMEQuickStart runs the README's quick start as pasted, in an empty
// directory holding the built binary as ./idem, and checks every output
// line it shows ("# HTTP/1.1 201 Created", "# {"count":1}", …): a line
// of the command's output must hold its words in order. Servers ("&") run
// in the background until the end, then get SIGTERM and must exit 0.
//
// What differs from a terminal, and why:
//   - ports: 8080 and 8787 may be taken on the machine running the tests,
//     so every ":8080" and ":8787" becomes a free port, and the commands
//     that listen on those ports by default (idem demo-upstream, idem
//     proxy) get --listen with it;
//   - ./scripts/build is not run: ./idem is the binary TestMain built with
//     go build (TestBuildStampsCommit runs scripts/build itself);
//   - ./scripts/test, the test suite, is not run from within it.
func TestREADMEQuickStart(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed; the README's quick start uses it")
	}
	steps := readmeQuickStart(t)
	dir := t.TempDir()
	if err := os.Symlink(idemBin, filepath.Join(dir, "idem")); err != nil {
		t.Fatal(err)
	}
	demoPort, proxyPort := freePort(t), freePort(t)
	ports := strings.NewReplacer(":8080", ":"+demoPort, ":8787", ":"+proxyPort)
	type server struct {
		cmd      *exec.Cmd
		out, err bytes.Buffer
		done     chan error
	}
	var servers []*server
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	seen := map[string]bool{}
	var checked []string
	for _, st := range steps {
		cmd := ports.Replace(st.cmd)
		listen := ""
		switch {
		case cmd == "./scripts/build" || cmd == "./scripts/test":
			continue
		case strings.HasPrefix(cmd, "./idem demo-upstream"):
			listen, seen["demo-upstream"] = "127.0.0.1:"+demoPort, true
		case strings.HasPrefix(cmd, "./idem proxy"):
			listen, seen["proxy"] = "127.0.0.1:"+proxyPort, true
		}
		if listen != "" && !strings.Contains(cmd, "--listen") {
			cmd += " --listen " + listen
		}
		if st.background {
			if len(st.want) > 0 {
				t.Fatalf("README.md: output shown under the background command %q", st.cmd)
			}
			if listen == "" {
				t.Fatalf("README.md: the background command %q is not a server this test knows", st.cmd)
			}
			s := &server{cmd: exec.Command("bash", "-c", "exec "+cmd), done: make(chan error, 1)}
			s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, &s.out, &s.err
			if err := s.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { s.done <- s.cmd.Wait() }()
			servers = append(servers, s)
			waitListening(t, listen, s.done, cmd)
			continue
		}
		c := exec.Command("bash", "-c", cmd)
		c.Dir = dir
		var out, errOut bytes.Buffer
		c.Stdout, c.Stderr = &out, &errOut
		if err := c.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", cmd, err, out.String(), errOut.String())
		}
		for _, w := range st.want {
			if !outputHas(out.String(), w) {
				t.Fatalf("%s: the README shows %q; the output was:\n%s", cmd, w, out.String())
			}
			checked = append(checked, w)
		}
	}
	if !seen["demo-upstream"] || !seen["proxy"] {
		t.Fatalf("the quick start no longer starts idem demo-upstream and idem proxy: %v", seen)
	}
	// The point the quick start makes must stay in it: the retry through
	// the proxy is a replay, and the API charged once.
	all := strings.Join(checked, "\n")
	for _, w := range []string{"Idempotent-Replayed: true", `{"count":1}`} {
		if !strings.Contains(all, w) {
			t.Errorf("the quick start no longer shows %s", w)
		}
	}
	for _, s := range servers {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.done:
			s.done <- err // for the cleanup
			if err != nil {
				t.Errorf("%v after SIGTERM: %v\n%s", s.cmd.Args, err, s.err.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%v did not stop on SIGTERM", s.cmd.Args)
		}
	}
}

// waitListening waits until addr accepts connections, failing if the
// server exits first or does not listen within a bound far above what it
// takes.
func waitListening(t *testing.T, addr string, done chan error, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("%s exited before listening: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s", what, addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
