package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
)

// maxBulk bounds how many records one bulk decision takes: a page's worth
// several times over, and a preview a person can still read.
const maxBulk = 500

// bulkForm is a bulk decision as the list's form (or the preview's
// confirmation) posts it: one outcome, one reason, for every record
// selected.
type bulkForm struct {
	As          string
	Status      int
	ContentType string
	Body        []byte
	HasBody     bool
	UseProvider bool
	Reason      string
	// Sels are the selected records with the version each was shown at.
	Sels []string
	Back string
}

// bulkItem is one record of a bulk decision: what it will replay, or why
// it is left out.
type bulkItem struct {
	R   row
	Sel string // the record with the version the preview showed
	// Skip says why the record is left out (nothing is written to it).
	Skip string
	// Replay is what its retries will receive; Released when none run.
	Replay   *response
	Released bool
	// Body is the body decided for it (the form's, or the provider's
	// object); ProviderBody says it came from the provider.
	Body         string
	ProviderBody bool
	// Done is the outcome of applying it: "" (previewing), "applied",
	// "skipped" or "failed".
	Done string
	// Hash is the SHA-256 of the result recorded, for the audit log.
	Hash string
}

// parseBulk reads and checks a bulk form; the problem, when not empty, is
// for the operator.
func parseBulk(r *http.Request) (*bulkForm, string) {
	f := r.PostForm
	b := &bulkForm{As: f.Get("as"), ContentType: strings.TrimSpace(f.Get("content_type")),
		Reason: strings.TrimSpace(f.Get("reason")), UseProvider: f.Get("use_provider") == "1", Back: safeNext(f.Get("back"))}
	seen := map[string]bool{}
	for _, s := range f["sel"] {
		if !seen[s] {
			seen[s] = true
			b.Sels = append(b.Sels, s)
		}
	}
	switch {
	case len(b.Sels) == 0:
		return nil, "Select at least one unknown record."
	case len(b.Sels) > maxBulk:
		return nil, fmt.Sprintf("At most %d records can be decided at once; %d are selected.", maxBulk, len(b.Sels))
	}
	switch b.As {
	case "released", "failed", "succeeded":
	default:
		return nil, "Choose a decision: released, failed or succeeded."
	}
	if b.Reason == "" {
		return nil, "A reason is required: every decision is logged with who took it and why."
	}
	if b.As == "released" {
		b.ContentType, b.UseProvider = "", false
		return b, ""
	}
	if v := strings.TrimSpace(f.Get("status")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 || n > 599 {
			return nil, "The status must be a final HTTP status (200–599)."
		}
		b.Status = n
	}
	if body := f.Get("body"); body != "" {
		b.Body, b.HasBody = []byte(body), true
	}
	if b.UseProvider && b.As != "succeeded" {
		return nil, "The provider's object is a body for succeeded only."
	}
	if b.UseProvider && b.HasBody {
		return nil, "Give a body or use the provider's object, not both."
	}
	if b.As == "succeeded" && !b.UseProvider && !b.HasBody {
		return nil, "succeeded needs the body retries will replay: the real answer the upstream gave (or, with --provider-url, each record's object from the provider). A bulk decision never invents one; release the records instead if nothing happened."
	}
	return b, ""
}

// plan builds the bulk items: each selected record as it is now, skipped
// when it changed since it was shown or cannot take the decision, else
// with what its retries will replay.
func (s *Server) plan(r *http.Request, b *bulkForm, bodies func(sel string) (string, bool)) []bulkItem {
	ctx, now := r.Context(), s.cfg.Now()
	var out []bulkItem
	for _, sel := range b.Sels {
		scope, key, ver, ok := parseSel(sel)
		if !ok {
			out = append(out, bulkItem{R: row{Key: "?"}, Skip: "not a record of this dashboard's lists"})
			continue
		}
		it := bulkItem{R: row{Scope: scope, Key: key, Link: recordLink(scope, key)}}
		cur, err := s.cfg.Store.Get(ctx, scope, key)
		switch {
		case errors.Is(err, idem.ErrNotFound):
			it.Skip = "gone: released or swept since it was shown"
			out = append(out, it)
			continue
		case err != nil:
			it.Skip = "the store could not be read: " + err.Error()
			out = append(out, it)
			continue
		}
		it.R = toRow(cur, now)
		it.Sel = (row{Scope: scope, Key: key, Version: it.R.Version}).Sel()
		if it.R.Version != ver {
			it.Skip = "changed since it was shown (decided, re-claimed, or its outcome arrived): left as it is"
			out = append(out, it)
			continue
		}
		if it.R.State != string(idem.StateUnknown) {
			it.Skip = "not unknown (" + it.R.State + "): only unknown records are decided here"
			out = append(out, it)
			continue
		}
		if b.As == "released" {
			it.Released = true
			out = append(out, it)
			continue
		}
		d := s.bulkDecision(b, cur)
		if sess, ok := r.Context().Value(sessionKey{}).(*session); ok {
			d.Operator = sess.operator
		}
		if b.UseProvider {
			body, ok := bodies(sel)
			if !ok {
				it.Skip = body
				out = append(out, it)
				continue
			}
			d.Body, d.HasBody, it.ProviderBody = []byte(body), true, true
			if d.ContentType == "" {
				d.ContentType = "application/json"
			}
		}
		it.Body = string(d.Body)
		// The rules of a single decision (validateDecision), record by record.
		if err := validateDecision(cur, d); err != nil {
			it.Skip = "refused: " + err.Error()
			out = append(out, it)
			continue
		}
		if cur.Origin() != "http" && (d.Status != 0 || d.ContentType != "") {
			it.Skip = "made by " + originName(cur.Origin()) + ", not over HTTP: a status or content type does not apply; decide it on its own page"
			out = append(out, it)
			continue
		}
		res, err := idem.EncodeDecision(cur, idem.Decision{As: idem.State(d.As), Body: d.Body, ContentType: d.ContentType, Status: d.Status, Message: d.Reason})
		if err != nil {
			it.Skip = "refused: " + err.Error()
			out = append(out, it)
			continue
		}
		it.Hash = resultHash(res)
		replay := *cur
		replay.Result, replay.State = res, idem.State(d.As)
		it.Replay = toResponse(&replay)
		out = append(out, it)
	}
	return out
}

func originName(o string) string {
	if o == "" {
		return "an application through the engine"
	}
	return "origin " + strconv.Quote(o)
}

// bulkDecision is the form's decision for one record.
func (s *Server) bulkDecision(b *bulkForm, cur *idem.Record) Decision {
	d := Decision{Scope: cur.Scope, Key: cur.Key, As: b.As, Status: b.Status, ContentType: b.ContentType,
		Reason: b.Reason, IfFence: cur.Fence}
	if b.HasBody {
		d.Body, d.HasBody = b.Body, true
	}
	return d
}

// providerBodies asks the provider for each selected record's object
// (preview): the body to use, or why there is none.
func (s *Server) providerBodies(r *http.Request) func(sel string) (string, bool) {
	return func(sel string) (string, bool) {
		if s.cfg.Provider == nil {
			return "no provider configured (--provider-url)", false
		}
		scope, key, _, _ := parseSel(sel)
		rec, err := s.cfg.Store.Get(r.Context(), scope, key)
		if err != nil {
			return "the store could not be read: " + err.Error(), false
		}
		lk := lookUp(r.Context(), s.cfg.Provider, rec)
		switch {
		case lk.NotApplied:
			return "the provider never applied " + strconv.Quote(lk.Key) + ": release it instead", false
		case lk.Problem != "":
			return "the provider could not tell: " + lk.Problem, false
		case lk.Applied.Status != reconcile.StatusApplied:
			return "the provider says " + lk.Status + ", not applied: decide it failed or on its own page", false
		}
		return lk.Raw, true
	}
}

// postedBodies are the provider objects the preview showed, carried by
// its confirmation form (one field per record), so that what is applied
// is what was previewed.
func postedBodies(r *http.Request) func(sel string) (string, bool) {
	return func(sel string) (string, bool) {
		v, ok := r.PostForm["obj-"+sel]
		if !ok || len(v) != 1 {
			return "the preview carried no provider object for it: preview again", false
		}
		return v[0], true
	}
}

func (s *Server) bulkPage(w http.ResponseWriter, status int, sess *session, b *bulkForm, items []bulkItem, applied bool) {
	n := map[string]int{}
	for _, it := range items {
		switch {
		case it.Done != "":
			n[it.Done]++
		case it.Skip != "":
			n["skip"]++
		default:
			n["ok"]++
		}
	}
	title := "Preview: decide " + strconv.Itoa(len(items)) + " record(s) " + b.As
	if applied {
		title = "Bulk decision: " + b.As
	}
	s.render(w, status, "bulk", map[string]any{"Title": title, "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "unknown",
		"B": b, "Body": string(b.Body), "Items": items, "N": n, "Applied": applied})
}

// bulkPreview shows, for each selected record, what its retries will
// replay, or why it is left out, with a form that confirms the decision.
// Only a decider gets here (requireRole in routes).
func (s *Server) bulkPreview(w http.ResponseWriter, r *http.Request, sess *session) {
	b, problem := parseBulk(r)
	if problem != "" {
		s.refuse(w, r, http.StatusBadRequest, "Bulk decision not previewed", problem)
		return
	}
	s.bulkPage(w, http.StatusOK, sess, b, s.plan(r, b, s.providerBodies(r)), false)
}

// bulkApply applies a previewed bulk decision, record by record, each
// through Config.Decide with its own fence: a record that changed since
// the preview (another version) is skipped and reported, never
// overwritten, and the store refuses one that changes between the check
// and the write. Only a decider gets here (requireRole in routes).
func (s *Server) bulkApply(w http.ResponseWriter, r *http.Request, sess *session) {
	b, problem := parseBulk(r)
	if problem != "" {
		s.refuse(w, r, http.StatusBadRequest, "Bulk decision not applied", problem)
		return
	}
	if s.audit != nil {
		if err := s.audit.ready(); err != nil {
			s.refuse(w, r, http.StatusServiceUnavailable, "Bulk decision refused: the audit log cannot take it",
				err.Error()+". Nothing was changed: a decision is taken only when it can be logged.")
			return
		}
	}
	items := s.plan(r, b, postedBodies(r))
	for i := range items {
		it := &items[i]
		if it.Skip != "" {
			it.Done = "skipped"
			continue
		}
		d := Decision{Scope: it.R.Scope, Key: it.R.Key, As: b.As, Status: b.Status, ContentType: b.ContentType,
			Reason: b.Reason, Operator: sess.operator, IfFence: it.R.Fence}
		if b.As != "released" && it.Body != "" {
			d.Body, d.HasBody = []byte(it.Body), true
			if it.ProviderBody && d.ContentType == "" {
				d.ContentType = "application/json"
			}
		}
		rec, err := s.cfg.Decide(r.Context(), d)
		switch {
		case errors.Is(err, idem.ErrFenced) || errors.Is(err, idem.ErrNotFound):
			it.Done, it.Skip = "skipped", "changed while the decision was applied ("+err.Error()+"): left as it is"
			continue
		case err != nil:
			it.Done, it.Skip = "failed", "not applied: "+err.Error()
			continue
		}
		it.Done = "applied"
		s.logDecision(r, sess, d, rec, it.Hash)
	}
	s.bulkPage(w, http.StatusOK, sess, b, items, true)
}

// logDecision writes a decision applied through the dashboard to its log
// and, with Config.AuditLog, to the audit trail, as a single decision is
// (recordDecision).
func (s *Server) logDecision(r *http.Request, sess *session, d Decision, rec *idem.Record, result string) {
	entry := AuditEntry{At: s.cfg.Now().UTC(), Operator: sess.operator, Role: string(sess.role), Scope: d.Scope, Key: d.Key, Decision: d.As,
		Status: d.Status, ContentType: d.ContentType, Result: result, Reason: d.Reason, FromFence: d.IfFence, Remote: r.RemoteAddr}
	if rec != nil {
		entry.ToFence = rec.Fence
	}
	s.recordDecision(entry)
}
