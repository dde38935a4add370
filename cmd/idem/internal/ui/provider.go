package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
)

// providerTimeout bounds one lookup at the provider from a page.
const providerTimeout = 10 * time.Second

// lookup is what the provider says it did for a record's forwarded key,
// as the pages show it.
type lookup struct {
	// Key is the key asked: the intent's forwarded key, or the record's.
	Key string
	// URL is where it was asked, when the provider says (an HTTP lookup).
	URL string
	// Found: the provider has an entry; NotApplied: it answered that it
	// never applied the key; Problem: it could not tell (nothing else set).
	Found, NotApplied bool
	Problem           string
	Status            string
	Amount            string
	AppliedAt         time.Time
	Reference         string
	// Raw is the provider's answer as it sent it; Pretty the same indented
	// when it is JSON.
	Raw, Pretty string
	// Compare says how the provider's amount sits with the intent's.
	Compare string
	// Applied is the provider's entry, for a decision to use.
	Applied reconcile.Applied
}

// forwardKey is the key a record's effect was sent to the provider with.
func forwardKey(r *idem.Record) string {
	if in, err := idem.DecodeIntent(r.Intent); err == nil && in != nil && in.ForwardKey != "" {
		return in.ForwardKey
	}
	return r.Key
}

// lookUp asks p about r's forwarded key.
func lookUp(ctx context.Context, p reconcile.Provider, r *idem.Record) *lookup {
	k := forwardKey(r)
	out := &lookup{Key: k}
	if u, ok := p.(interface{ URL(string) string }); ok {
		out.URL = u.URL(k)
	}
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	a, err := p.Lookup(ctx, k)
	switch {
	case errors.Is(err, reconcile.ErrNotApplied):
		out.NotApplied = true
		return out
	case err != nil:
		out.Problem = err.Error()
		return out
	}
	out.Found, out.Applied = true, a
	out.Status, out.Amount, out.AppliedAt, out.Reference = string(a.Status), formatAmount(a.Amount, a.Currency), a.AppliedAt, a.Reference
	out.Raw = string(a.Result)
	var buf bytes.Buffer
	if json.Indent(&buf, a.Result, "", "  ") == nil {
		out.Pretty = buf.String()
	} else {
		out.Pretty = clip(out.Raw)
	}
	if in, err := idem.DecodeIntent(r.Intent); err == nil && in != nil && (in.Amount != 0 || in.Currency != "") {
		want := formatAmount(in.Amount, in.Currency)
		if in.Amount == a.Amount && strings.EqualFold(in.Currency, a.Currency) {
			out.Compare = "matches the intent (" + want + ")"
		} else {
			out.Compare = "differs from the intent (" + want + ")"
		}
	}
	return out
}

// lookupPage shows what the provider says it did for a record, and for an
// unknown record that the provider applied, a form that decides it
// succeeded with the provider's object as the body retries replay.
func (s *Server) lookupPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	scope, key := q.Get("scope"), q.Get("key")
	if s.cfg.Provider == nil {
		s.refuse(w, r, http.StatusNotFound, "No provider configured",
			"Start idem ui with --provider-url TEMPLATE (the lookup URL of idem reconcile, with {key}) to ask the provider what it did for a key.")
		return
	}
	rec, err := s.cfg.Store.Get(r.Context(), scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		s.refuse(w, r, http.StatusNotFound, "No such record", "There is no record for key "+strconv.Quote(key)+" in scope "+strconv.Quote(scope)+" (released, swept, or never made).")
		return
	}
	if err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	now := s.cfg.Now()
	rw := toRow(rec, now)
	lk := lookUp(r.Context(), s.cfg.Provider, rec)
	s.render(w, http.StatusOK, "lookup", map[string]any{
		"Title": "Provider: " + key, "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "unknown",
		"R": rw, "L": lk,
		"Offer": lk.Found && lk.Applied.Status == reconcile.StatusApplied && rw.State == string(idem.StateUnknown) && sess.can(RoleDecider),
	})
}
