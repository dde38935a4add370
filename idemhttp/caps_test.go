package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// tinyMembers returns a JSON object of n members with short base-36 names,
// all 0 but member i, which is v.
func tinyMembers(n, i, v int) string {
	var b strings.Builder
	b.WriteByte('{')
	for j := range n {
		if j > 0 {
			b.WriteByte(',')
		}
		val := "0"
		if j == i {
			val = strconv.Itoa(v)
		}
		b.WriteString(`"` + strconv.FormatInt(int64(j), 36) + `":` + val)
	}
	b.WriteByte('}')
	return b.String()
}

// tenantScope puts every request in one principal's scope, where a 422
// names the changed fields.
func tenantScope(*http.Request) (string, error) { return "tenant-1", nil }

// A 1 MiB body of ~111k tiny members stores a digest list of a few KiB,
// not megabytes, and a 422 still names a changed member among the first
// MaxDigests (in canonical order), and "…" for a change past them.
func TestDigestListIsBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{Scope: tenantScope}, created(&n))
		const members = 111_000
		body := tinyMembers(members, -1, 0)
		if len(body) < 900<<10 || len(body) > idemhttp.DefaultMaxBody {
			t.Fatalf("body of %d bytes, want about 1 MiB", len(body))
		}
		wantStatus(t, e.do("POST", "/bulk", `"big"`, body), http.StatusCreated)
		rec, err := e.store.Get(context.Background(), "tenant-1", "big")
		if err != nil {
			t.Fatal(err)
		}
		intent, err := idem.DecodeIntent(rec.Intent)
		if err != nil {
			t.Fatal(err)
		}
		_, keyed, _ := strings.Cut(intent.Fields["body_hmac"], ":")
		d := idem.Digests(keyed)
		if d.Len() != idem.DefaultMaxDigests+1 || len(d) > 4<<10 || len(rec.Intent) > 8<<10 {
			t.Fatalf("stored digests: %d entries, %d bytes (intent %d bytes); want %d entries within 4 KiB",
				d.Len(), len(d), len(rec.Intent), idem.DefaultMaxDigests+1)
		}
		// Member "1" sorts among the first (canonical order is by name:
		// "0", "1", "10", "100", ...); "zzz" (46655) sorts past them.
		p := wantProblem(t, e.do("POST", "/bulk", `"big"`, tinyMembers(members, 1, 7)),
			http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if !slices.Equal(p.Fields, []string{"1"}) {
			t.Errorf("changed member 1: fields %q, want [1]", p.Fields)
		}
		late, _ := strconv.ParseInt("zzz", 36, 64)
		p = wantProblem(t, e.do("POST", "/bulk", `"big"`, tinyMembers(members, int(late), 7)),
			http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if !slices.Equal(p.Fields, []string{idem.RestMembers}) {
			t.Errorf("changed member zzz: fields %q, want [%s]", p.Fields, idem.RestMembers)
		}
		if n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// Config.MaxDigests sets the bound.
func TestMaxDigestsConfig(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		e := newEnv(t, open, idem.Config{}, idemhttp.Config{MaxDigests: 2, Scope: tenantScope}, created(&n))
		wantStatus(t, e.do("POST", "/x", `"k"`, `{"a":1,"b":2,"c":3,"d":4}`), http.StatusCreated)
		p := wantProblem(t, e.do("POST", "/x", `"k"`, `{"a":0,"b":2,"c":3,"d":5}`), http.StatusUnprocessableEntity, idemhttp.TypeKeyMismatch)
		if !slices.Equal(p.Fields, []string{"a", idem.RestMembers}) {
			t.Errorf("fields %q, want [a %s]", p.Fields, idem.RestMembers)
		}
	})
}

// An intent over the engine's MaxIntent (here from the Intent hook) is 413
// intent-too-large, before anything is claimed or run.
func TestIntentTooLargeIs413(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(t *testing.T) idem.Store) {
		var n int64
		cfg := idemhttp.Config{Intent: func(r *http.Request, body []byte, in *idem.Intent) {
			in.Fields["memo"] = strings.Repeat("m", 2048)
		}}
		e := newEnv(t, open, idem.Config{MaxIntent: 1024}, cfg, created(&n))
		p := wantProblem(t, e.do("POST", "/x", `"k"`, `{"a":1}`), http.StatusRequestEntityTooLarge, idemhttp.TypeIntentTooLarge)
		if !strings.Contains(p.Detail, "1024") {
			t.Errorf("detail %q does not name the bound", p.Detail)
		}
		if _, err := e.store.Get(context.Background(), "", "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("a record exists after 413: %v", err)
		}
		if n != 0 {
			t.Fatal("handler ran")
		}
	})
}
