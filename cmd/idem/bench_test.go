package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchOutputShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, dsn := range []string{"memory://", "sqlite://" + filepath.Join(dir, "bench.db")} {
		o, e, code := runCLI("bench", "--store", dsn, "--duration", "200ms", "--concurrency", "4", "--scenarios", "first,replay")
		if code != exitOK {
			t.Fatalf("%s: code %d, stderr %q", dsn, code, e)
		}
		for _, want := range []string{"idem bench", "durability", "first-time requests", "replays", "idem/raw", "idem+cache", "load average"} {
			if !strings.Contains(o, want) {
				t.Errorf("%s: output lacks %q:\n%s", dsn, want, o)
			}
		}
		if !strings.Contains(e, "[6/6]") {
			t.Errorf("%s: no progress line on stderr: %q", dsn, e)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("scratch files left behind: %v", left)
	}
}

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	o, e, code := runCLI("bench", "--store", "memory://", "--duration", "200ms", "--concurrency", "2", "--scenarios", "first", "--json")
	if code != exitOK {
		t.Fatalf("code %d, stderr %q", code, e)
	}
	var rep struct {
		Header struct{ Store string }
		Cells  []struct {
			Side  string
			Ratio float64
			Ops   int64
		}
	}
	if err := json.Unmarshal([]byte(o), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, o)
	}
	if rep.Header.Store != "memory://" || len(rep.Cells) != 3 || rep.Cells[1].Side != "idem" || rep.Cells[1].Ratio <= 0 {
		t.Fatalf("report = %+v", rep)
	}
}

func TestBenchExitCodes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench"}, // no --store
		{"bench", "--store", "memory://", "--concurrency", "0"},
		{"bench", "--store", "memory://", "--payload", "lots"},
		{"bench", "--store", "memory://", "--scenarios", "bogus"},
		{"bench", "--store", "memory://", "--duration", "1ms"},
		{"bench", "--store", "nosuch://x"},
		{"bench", "--store", "memory://", "extra"},
		{"bench", "--store", "memory://", "--prefill", "1M,10k"},
		{"bench", "--store", "memory://", "--prefill", "lots"},
		{"bench", "--store", "memory://", "--sweep-under-load", "10k,1M"},
		{"bench", "--store", "memory://", "--sweep-under-load", "1M", "--sweep-rate", "-1"},
	} {
		if _, e, code := runCLI(args...); code != exitUsage || !strings.Contains(e, "Run 'idem bench --help' for usage.") {
			t.Errorf("%q: code %d, stderr %q", args, code, e)
		}
	}
	// The memory store has no loader for --prefill: a failure that says so.
	if _, e, code := runCLI("bench", "--store", "memory://", "--prefill", "10", "--duration", "20ms"); code != exitFailure || !strings.Contains(e, "no loader for memory") {
		t.Fatalf("--prefill on memory://: code %d, stderr %q", code, e)
	}
	// A store that cannot be reached is a failure (1) with a clear message.
	_, e, code := runCLI("bench", "--store", "redis://127.0.0.1:1/0", "--duration", "20ms")
	if code != exitFailure || !strings.Contains(e, "cannot reach") {
		t.Fatalf("unreachable store: code %d, stderr %q", code, e)
	}
}
