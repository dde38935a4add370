package migration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/idemkit/idem/storekit/migration"
)

func TestLoadOrdersAndChecks(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_more.sql":    {Data: []byte("B")},
		"m/0001_records.sql": {Data: []byte("A")},
	}
	ms, err := migration.Load("x", fsys, "m/*.sql")
	if err != nil || len(ms) != 2 || ms[0].File != "0001_records.sql" || ms[0].Name != "records" || ms[1].SQL != "B" {
		t.Fatalf("Load = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no number": {"m/records.sql": {}},
		"zero":      {"m/0000_x.sql": {}},
		"no name":   {"m/0001_.sql": {}},
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"twice":     {"m/0001_a.sql": {}, "m/01_b.sql": {}},
	} {
		if _, err := migration.Load("x", fsys, "m/*.sql"); err == nil || !strings.HasPrefix(err.Error(), "x: ") {
			t.Errorf("%s: Load = %v, want an error naming the package", name, err)
		}
	}
}

type target struct {
	applied map[int]bool
	ran     []int
	fail    int
}

func (t *target) Applied(context.Context) (map[int]bool, error) { return t.applied, nil }

func (t *target) Apply(_ context.Context, m migration.Migration) error {
	if m.Version == t.fail {
		return errors.New("syntax error")
	}
	t.ran = append(t.ran, m.Version)
	return nil
}

func TestRunSkipsAppliedAndNamesTheFailure(t *testing.T) {
	ms := []migration.Migration{{Version: 1, File: "0001_a.sql"}, {Version: 2, File: "0002_b.sql"}, {Version: 3, File: "0003_c.sql"}}
	tg := &target{applied: map[int]bool{1: true}, fail: 3}
	err := migration.Run(context.Background(), tg, ms)
	if err == nil || !strings.Contains(err.Error(), "0003_c.sql") || len(tg.ran) != 1 || tg.ran[0] != 2 {
		t.Fatalf("Run: ran %v, err %v; want [2] and an error naming 0003_c.sql", tg.ran, err)
	}
}
