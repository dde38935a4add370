package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Dynalite is dynalite (an implementation of DynamoDB on LevelDB, run by
// Node.js), pinned in internal/testenv/dynalite/package.json and its
// package-lock.json. The tests install it with `npm ci` into a cache
// directory named after the lock file's hash ($IDEM_DYNALITE_CACHE, or
// $HOME/.cache/idem-ci) and start it on free loopback ports of their own.
// IDEM_TEST_DYNAMODB, when set, names an endpoint to use instead.
var Dynalite = Service{"dynalite (DynamoDB)", "IDEM_TEST_DYNAMODB", ""}

var (
	dynaliteOnce sync.Once
	dynaliteCLI  string // path of dynalite's cli.js
	dynaliteErr  error

	sharedMu   sync.Mutex
	sharedURL  string
	sharedProc *exec.Cmd
)

// StartDynalite starts a dynalite of the test's own on a free loopback
// port, stopped when the test ends, and returns its endpoint URL
// (http://127.0.0.1:PORT). Its tables live in memory. Without node and
// npm on PATH (or when the install fails) the test is skipped, or fails
// when IDEM_REQUIRE_SERVICES=1. With IDEM_TEST_DYNAMODB set it returns
// that endpoint instead.
func StartDynalite(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(Dynalite.Env); u != "" {
		return Dynalite.Need(t)
	}
	cmd, url := startDynalite(t)
	t.Cleanup(func() { stopProc(cmd) })
	return url
}

// SharedDynalite is [StartDynalite] for a whole test binary: the first
// call starts one dynalite that every later call returns. The package's
// TestMain stops it with [StopSharedDynalite] after m.Run (it is also
// killed if the test binary dies first).
func SharedDynalite(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(Dynalite.Env); u != "" {
		return Dynalite.Need(t)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedURL == "" {
		sharedProc, sharedURL = startDynalite(t)
	}
	return sharedURL
}

// StopSharedDynalite stops the dynalite [SharedDynalite] started, if any.
func StopSharedDynalite() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedProc != nil {
		stopProc(sharedProc)
		sharedProc, sharedURL = nil, ""
	}
}

func stopProc(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// startDynalite installs dynalite (once per process) and starts it.
func startDynalite(t testing.TB) (*exec.Cmd, string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Dynalite.unavailable(t, "Node.js is not installed: "+err.Error())
		return nil, ""
	}
	dynaliteOnce.Do(func() { dynaliteCLI, dynaliteErr = installDynalite() })
	if dynaliteErr != nil {
		Dynalite.unavailable(t, dynaliteErr.Error())
		return nil, ""
	}
	port := freePort(t)
	cmd := exec.Command(node, dynaliteCLI, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dynalite: %v", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitListening(addr, 200); err != nil {
		stopProc(cmd)
		t.Fatalf("dynalite on %s did not come up: %v", addr, err)
	}
	return cmd, "http://" + addr
}

// dynaliteSource is the directory of the pinned package.json.
func dynaliteSource() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate internal/testenv's source")
	}
	return filepath.Join(filepath.Dir(file), "dynalite"), nil
}

// installDynalite runs `npm ci` for the pinned lock file into the cache
// directory named after its hash, unless an earlier run did, and returns
// the path of dynalite's cli.js. Concurrent test binaries take a lock
// file; the install goes to a temporary directory renamed into place.
func installDynalite() (string, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is not installed: %v", err)
	}
	src, err := dynaliteSource()
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("reading the pinned lock file: %v", err)
	}
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return "", fmt.Errorf("reading the pinned package.json: %v", err)
	}
	sum := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	base := os.Getenv("IDEM_DYNALITE_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for dynalite (set IDEM_DYNALITE_CACHE): %v", err)
		}
		base = filepath.Join(home, ".cache", "idem-ci")
	}
	dir := filepath.Join(base, "dynalite-"+hex.EncodeToString(sum[:])[:16])
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err == nil {
		return cli, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	lf, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(cli); err == nil {
		return cli, nil // another test binary installed it meanwhile
	}
	tmp, err := os.MkdirTemp(base, "dynalite-install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", err
		}
	}
	// --ignore-scripts: classic-level ships prebuilt binaries for linux;
	// its install script would only compile one from source.
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci of the pinned dynalite failed: %v: %s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return cli, nil
}
