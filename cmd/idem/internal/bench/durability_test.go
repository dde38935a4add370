package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDurabilityNotes(t *testing.T) {
	for _, c := range []struct {
		name, note, want string
	}{
		{"redis durable", redisDurabilityNote("yes", "always"), ""},
		{"redis unread", redisDurabilityNote("?", "?"), ""},
		{"redis no aof", redisDurabilityNote("no", "everysec"), "appendonly=no"},
		{"redis everysec", redisDurabilityNote("yes", "everysec"), "appendfsync=everysec"},
		{"redis no fsync", redisDurabilityNote("yes", "no"), "appendfsync=no"},
		{"postgres durable", postgresDurabilityNote("on", "on"), ""},
		{"postgres local", postgresDurabilityNote("local", "on"), ""},
		{"postgres async", postgresDurabilityNote("off", "on"), "synchronous_commit=off"},
		{"postgres no fsync", postgresDurabilityNote("on", "off"), "fsync=off"},
		{"mysql durable", mysqlDurabilityNote("1"), ""},
		{"mysql unread", mysqlDurabilityNote("?"), ""},
		{"mysql 2", mysqlDurabilityNote("2"), "innodb_flush_log_at_trx_commit=2"},
		{"mysql 0", mysqlDurabilityNote("0"), "innodb_flush_log_at_trx_commit=0"},
		{"sqlite full", sqliteDurabilityNote("FULL"), ""},
		{"sqlite extra", sqliteDurabilityNote("extra"), ""},
		{"sqlite normal", sqliteDurabilityNote("normal"), "synchronous=NORMAL"},
		{"nats R3 file", natsDurabilityNote(3, false), ""},
		{"nats R1", natsDurabilityNote(1, false), "replicas=1"},
		{"nats memory", natsDurabilityNote(3, true), "storage=memory"},
	} {
		if (c.want == "") != (c.note == "") || !strings.Contains(c.note, c.want) {
			t.Errorf("%s: note %q, want one naming %q", c.name, c.note, c.want)
		}
	}
}

// TestReportSaysWhenNotDurable runs the bench on SQLite at both settings:
// only the faster one carries a note, in the header and in the text.
func TestReportSaysWhenNotDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ query, want string }{{"", ""}, {"?sync=normal", "synchronous=NORMAL"}} {
		rep, err := Run(context.Background(), Options{Store: "sqlite://" + filepath.Join(dir, "d.db") + c.query,
			Concurrency: []int{1}, Duration: 20 * time.Millisecond, Scenarios: []string{ScenarioFirst}})
		if err != nil {
			t.Fatal(err)
		}
		note := rep.Header.DurabilityNote
		if (c.want == "") != (note == "") || !strings.Contains(note, c.want) {
			t.Fatalf("%q: durability note %q, want one naming %q", c.query, note, c.want)
		}
		var text strings.Builder
		if err := WriteText(&text, rep); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(text.String(), "not durable: "+note); got != (note != "") {
			t.Fatalf("%q: text report:\n%s", c.query, text.String())
		}
	}
}
