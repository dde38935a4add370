package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
)

// Strings planted in a request and its response, looked for in the
// store's bytes.
const (
	plantedBody   = "planted-resp-4e1b-account-9931"
	plantedIntent = "planted-intent-7c22-payee"
)

// writeKeyFile writes a key file with the given ids (the first current);
// the secret of an id is derived from it, so two files name the same key.
func writeKeyFile(t *testing.T, mode os.FileMode, ids ...string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		secret := bytes.Repeat([]byte(id[:1]), 32)
		b.WriteString(id + ":" + base64.StdEncoding.EncodeToString(secret) + "\n")
	}
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(b.String()), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// containsPlanted reports whether dump holds a planted string in clear
// or hex-encoded (pg_dump writes bytea as hex).
func containsPlanted(dump []byte) []string {
	var found []string
	for _, s := range []string{plantedBody, plantedIntent} {
		if bytes.Contains(dump, []byte(s)) || bytes.Contains(bytes.ToLower(dump), []byte(hex.EncodeToString([]byte(s)))) {
			found = append(found, s)
		}
	}
	return found
}

type atRestStore struct {
	dsn  string
	dump func(t *testing.T) []byte // the bytes the store keeps
}

func atRestStores(t *testing.T) map[string]func(t *testing.T) atRestStore {
	return map[string]func(t *testing.T) atRestStore{
		"sqlite": func(t *testing.T) atRestStore {
			path := filepath.Join(t.TempDir(), "idem.db")
			return atRestStore{dsn: "sqlite://" + path, dump: func(t *testing.T) []byte {
				var all []byte
				for _, f := range []string{path, path + "-wal", path + "-shm"} {
					b, err := os.ReadFile(f)
					if err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
					all = append(all, b...)
				}
				return all
			}}
		},
		"postgres": func(t *testing.T) atRestStore {
			dsn, schema := pgtest.Schema(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return atRestStore{dsn: dsn + sep + "schema=" + schema, dump: func(t *testing.T) []byte {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				out, err := exec.CommandContext(ctx, "pg_dump", "--data-only", "--schema="+schema, dsn).Output()
				if err != nil {
					t.Fatalf("pg_dump: %v", err)
				}
				if !bytes.Contains(out, []byte("idem_records")) {
					t.Fatalf("pg_dump of schema %s has no idem_records:\n%s", schema, out)
				}
				return out
			}}
		},
	}
}

// TestEncryptionAtRest: the proxy with --encryption-key-file records
// responses and intents the store's bytes do not show (an SQLite file and
// its WAL, a pg_dump), while the same run without the flag shows them —
// so the check can fail. Replays, idem get, idem list and idem resolve
// read through the key file; after a rotation ([b current, a old]) the
// records of a still replay; with a key file lacking a, a replay is a 500
// record-unreadable naming the key id and the upstream is not called
// again, and idem get fails naming it.
func TestEncryptionAtRest(t *testing.T) {
	for name, mk := range atRestStores(t) {
		for _, encrypt := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/plain", true: "/encrypted"}[encrypt], func(t *testing.T) {
				t.Parallel()
				encryptionRound(t, mk(t), encrypt)
			})
		}
	}
}

func encryptionRound(t *testing.T, st atRestStore, encrypt bool) {
	up := newTestUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"account":"` + plantedBody + `"}`))
	})
	keysA := writeKeyFile(t, 0o600, "a")
	// --replay-cache 0: the test reads a forced resolution made by another
	// process (idem resolve) through the running proxy at once.
	args := []string{"--global-scope", "--upstream", up.URL, "--store", st.dsn, "--intent", "counterparty=/to", "--replay-cache", "0"}
	var keyArgs []string
	if encrypt {
		keyArgs = []string{"--encryption-key-file", keysA}
	}
	p := startProxy(t, append(args, keyArgs...)...)
	body := `{"to":"` + plantedIntent + `","amount":5}`
	wantCode(t, send(t, "POST", p.url("/pay"), `"k1"`, body), 201, "")
	r := send(t, "POST", p.url("/pay"), `"k1"`, body)
	if r.status != 201 || !strings.Contains(r.body, plantedBody) || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %s", r.status, r.body)
	}
	found := containsPlanted(st.dump(t))
	if encrypt && len(found) > 0 {
		t.Fatalf("the store's bytes show %v in clear", found)
	}
	if !encrypt {
		if len(found) != 2 {
			t.Fatalf("without encryption the store's bytes show %v; want both planted strings (else this check proves nothing)", found)
		}
		return
	}

	// The reading commands, with and without the key file.
	out, errs, code := cli(t, "get", "--store", st.dsn, "k1", "--json", "--encryption-key-file", keysA)
	if code != 0 || !strings.Contains(out, plantedBody) || !strings.Contains(out, plantedIntent) {
		t.Fatalf("get with the key file: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, "get", "--store", st.dsn, "k1")
	if code != 1 || strings.Contains(out, plantedBody) || !strings.Contains(errs, `key id "a"`) {
		t.Fatalf("get without the key file: exit %d\n%s%s; want 1 and an error naming key id a", code, out, errs)
	}
	out, errs, code = cli(t, "list", "--store", st.dsn, "--spool", "", "--encryption-key-file", keysA)
	if code != 0 || !strings.Contains(out, "201") {
		t.Fatalf("list with the key file: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = cli(t, "list", "--store", st.dsn, "--spool", "", "--json")
	if code != 1 || !strings.Contains(out, `"k1"`) || strings.Contains(out, plantedBody) || !strings.Contains(errs, `key id "a"`) {
		t.Fatalf("list without the key file: exit %d\n%s%s; want the record listed without its response, exit 1", code, out, errs)
	}

	// Rotation: [b current, a old] replays a's record and seals new ones under b.
	_ = p.cmd.Process.Kill()
	<-p.exited
	keysBA := writeKeyFile(t, 0o600, "b", "a")
	p = startProxy(t, append(args, "--encryption-key-file", keysBA)...)
	if r := send(t, "POST", p.url("/pay"), `"k1"`, body); r.status != 201 || !strings.Contains(r.body, plantedBody) {
		t.Fatalf("replay after rotation = %d %s", r.status, r.body)
	}
	wantCode(t, send(t, "POST", p.url("/pay"), `"k2"`, body), 201, "")
	// Its replay: with a replay cache, the proxy would now hold k2 in memory.
	wantCode(t, send(t, "POST", p.url("/pay"), `"k2"`, body), 201, "")
	if found := containsPlanted(st.dump(t)); len(found) > 0 {
		t.Fatalf("after rotation the store's bytes show %v", found)
	}

	// idem resolve reads the sealed intent (it is an HTTP record) and
	// seals the response it records.
	bodyFile := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(bodyFile, []byte(`{"fixed":"`+plantedBody+`-2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = cli(t, "resolve", "--store", st.dsn, "k2", "--as", "succeeded", "--status", "200", "--body", bodyFile,
		"--force", "--reason", "test", "--encryption-key-file", keysBA)
	if code != 0 {
		t.Fatalf("resolve: exit %d\n%s%s", code, out, errs)
	}
	if found := containsPlanted(st.dump(t)); len(found) > 0 {
		t.Fatalf("after resolve the store's bytes show %v", found)
	}
	if r := send(t, "POST", p.url("/pay"), `"k2"`, body); r.status != 200 || !strings.Contains(r.body, plantedBody+"-2") {
		t.Fatalf("replay of the resolution = %d %s", r.status, r.body)
	}

	// Key a gone: the client gets a 500 naming the key id; nothing re-runs.
	_ = p.cmd.Process.Kill()
	<-p.exited
	p = startProxy(t, append(args, "--encryption-key-file", writeKeyFile(t, 0o600, "b"))...)
	for i := 0; i < 2; i++ {
		r := send(t, "POST", p.url("/pay"), `"k1"`, body)
		wantCode(t, r, 500, "record-unreadable")
		if !strings.Contains(r.body, `\"a\"`) || strings.Contains(r.body, plantedBody) {
			t.Fatalf("problem %s: want it to name key id a, with no plaintext", r.body)
		}
	}
	if n := up.count("/pay"); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (k1 and k2 once each)", n)
	}
	if !strings.Contains(p.logs(), "cannot be decrypted") {
		t.Fatalf("the proxy did not log the unreadable record:\n%s", p.logs())
	}
}

// TestEncryptionKeyFileRefused: a key file other users can read, a
// malformed one and a missing one are usage errors (exit 2) naming the
// flag, on the proxy and on the reading commands.
func TestEncryptionKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("a:not-base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("a:"+base64.StdEncoding.EncodeToString(make([]byte, 16))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"world-readable": writeKeyFile(t, 0o644, "a"),
		"not base64":     bad,
		"16-byte key":    short,
		"missing":        filepath.Join(dir, "missing"),
	}
	db := "sqlite://" + filepath.Join(dir, "idem.db")
	for name, file := range files {
		for _, args := range [][]string{
			{"proxy", "--global-scope", "--upstream", "http://127.0.0.1:1", "--store", db},
			{"get", "--store", db, "k"},
			{"list", "--store", db},
			{"resolve", "--store", db, "k", "--as", "released", "--reason", "x"},
			{"reconcile", "--store", db, "--provider-csv", bad, "--settlement-window", "1h"},
		} {
			out, errs, code := cli(t, append(args, "--encryption-key-file", file)...)
			if code != 2 || !strings.Contains(errs, "--encryption-key-file") || !strings.Contains(errs, "Run 'idem "+args[0]+" --help' for usage.") {
				t.Errorf("%s, idem %s: exit %d\n%s%s; want 2 and a usage error naming the flag", name, args[0], code, out, errs)
			}
		}
	}
}
