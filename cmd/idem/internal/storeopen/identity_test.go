package storeopen

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestIdentity(t *testing.T) {
	abs, _ := filepath.Abs("idem.db")
	for dsn, want := range map[string]string{
		"sqlite://idem.db":              "sqlite://" + abs,
		"sqlite://idem.db?sync=normal":  "sqlite://" + abs,
		"memory://":                     "memory://",
		"postgres://u:secret@db:5432/x": "postgres://u@db:5432/x",
		"postgres://u:other@DB:5432/x?sslmode=disable&batch=eager": "postgres://u@db:5432/x",
		"postgres://u@a:5432,b:5432/x?schema=s":                    "postgres://u@a:5432,b:5432/x?schema=s",
		"redis://:pw@127.0.0.1:6379/0?prefix=p&pool_size=3":        "redis://@127.0.0.1:6379/0?prefix=p",
		"mysql://root:pw@127.0.0.1:3306/test?table=t":              "mysql://root@127.0.0.1:3306/test?table=t",
	} {
		d, err := Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if got := d.Identity(); got != want {
			t.Errorf("Identity(%s) = %q, want %q", dsn, got, want)
		}
		if strings.Contains(d.Identity(), "secret") || strings.Contains(d.Identity(), "pw") {
			t.Errorf("Identity(%s) keeps a password", dsn)
		}
	}
	a, _ := Parse("postgres://u@db/x?schema=a")
	b, _ := Parse("postgres://u@db/x?schema=b")
	if a.Identity() == b.Identity() {
		t.Error("two schemas share an identity")
	}
}
