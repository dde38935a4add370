package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// TestHeaderNamesTheGroupCommitInEffect: the report's header says what
// group commit the store runs, the CLI's default included, which the DSN's
// query does not show.
func TestHeaderNamesTheGroupCommitInEffect(t *testing.T) {
	for dsn, want := range map[string]string{
		"":              "eager (no window)",
		"?batch=0":      "off",
		"?batch=2ms":    "window 2ms",
		"?batch_size=8": "eager (no window)",
	} {
		st, err := storeopen.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "gc.db")+dsn, storeopen.Options{Migrate: true})
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if got := groupCommitOf(st); got != want {
			t.Errorf("sqlite%s: group commit %q, want %q", dsn, got, want)
		}
		_ = st.Close()
	}
}
