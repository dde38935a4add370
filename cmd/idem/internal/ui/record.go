package ui

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// event is one line of a record's history.
type event struct {
	At   time.Time
	What string
	Who  string
	Why  string
}

// history is what the record itself says happened (its claim, its lease,
// its outcome, a resolution's attempt id) merged with the decisions the
// audit log holds for it.
func history(r *idem.Record, audit []AuditEntry, now time.Time) []event {
	var ev []event
	claim := "claimed (fence " + strconv.FormatInt(r.Fence, 10) + ", attempt " + r.AttemptID + ")"
	if r.Fence > 1 {
		claim = "current claim made (fence " + strconv.FormatInt(r.Fence, 10) + ": claimed or resolved " + strconv.FormatInt(r.Fence-1, 10) + " time(s) before)"
	}
	ev = append(ev, event{At: r.CreatedAt, What: claim})
	if r.State == idem.StateInProgress {
		what := "lease runs until"
		if r.EffectiveState(now) == idem.StateUnknown {
			what = "lease expired: no outcome was recorded, so every reader treats the record as unknown"
		}
		ev = append(ev, event{At: r.LeaseUntil, What: what})
	}
	if !r.CompletedAt.IsZero() {
		what := "outcome recorded: " + string(r.State)
		switch {
		case r.State == idem.StateUnknown:
			what = "marked unknown: the attempt ended without an outcome idem could know (crash, lease lost, timeout)"
		case strings.HasPrefix(r.AttemptID, "resolve-"):
			what = "resolved as " + string(r.State) + " (fence " + strconv.FormatInt(r.Fence, 10) + ")"
		}
		ev = append(ev, event{At: r.CompletedAt, What: what})
	}
	for _, a := range audit {
		what := "decided " + a.Decision + " through the dashboard (fence " + strconv.FormatInt(a.FromFence, 10)
		if a.ToFence != 0 {
			what += " → " + strconv.FormatInt(a.ToFence, 10)
		}
		ev = append(ev, event{At: a.At, What: what + ")", Who: a.Operator, Why: a.Reason})
	}
	for i := 1; i < len(ev); i++ {
		for j := i; j > 0 && ev[j].At.Before(ev[j-1].At); j-- {
			ev[j], ev[j-1] = ev[j-1], ev[j]
		}
	}
	return ev
}

func (s *Server) recordPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	scope, key := q.Get("scope"), q.Get("key")
	s.showRecord(w, r, sess, scope, key, http.StatusOK, "", q.Get("resolved"), nil)
}

// showRecord renders a record's page; pv, when not nil, is the preview of
// the decision the form (kept from the post) would apply.
func (s *Server) showRecord(w http.ResponseWriter, r *http.Request, sess *session, scope, key string, status int, problem, resolved string, pv *preview) {
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
	var audit []AuditEntry
	var auditProblem string
	if s.audit != nil {
		if audit, err = s.audit.forRecord(scope, key); err != nil {
			auditProblem = "the audit log could not be read: " + err.Error()
		}
	}
	rw := toRow(rec, now)
	form := r.PostForm
	if form == nil {
		form = url.Values{}
	}
	s.render(w, status, "record", map[string]any{
		"Title": "Record " + key, "Operator": sess.operator, "Role": string(sess.role), "CSRF": sess.csrf, "Nav": "unknown",
		"R": rw, "Rec": rec, "Response": toResponse(rec), "History": history(rec, audit, now),
		"Decidable": rw.State == string(idem.StateUnknown), "CanDecide": sess.can(RoleDecider),
		"HTTPMade": idemhttp.MadeRecord(rec), "SpokeJSON": recordedJSON(rec), "Origin": rec.Origin(),
		"Problem": problem, "Resolved": resolved, "Preview": pv,
		"AuditOff": s.audit == nil, "AuditProblem": auditProblem, "Form": form,
		"Fingerprint": rec.Fingerprint.String(), "Mark": string(rec.Mark),
	})
}

// decisionForm reads the record page's decision form. A release keeps
// none of the response fields (the page hides them, but a browser may
// still post what was typed before released was chosen).
func decisionForm(f url.Values, sess *session) (Decision, error) {
	d := Decision{Scope: f.Get("scope"), Key: f.Get("key"), As: f.Get("as"), Reason: strings.TrimSpace(f.Get("reason")),
		Operator: sess.operator, ContentType: strings.TrimSpace(f.Get("content_type"))}
	if d.As == "released" {
		d.ContentType = ""
		return d, nil
	}
	if v := strings.TrimSpace(f.Get("status")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 || n > 599 {
			return d, refused("The status must be a final HTTP status (200–599).")
		}
		d.Status = n
	}
	if body := f.Get("body"); body != "" {
		d.Body, d.HasBody = []byte(body), true
	}
	return d, nil
}

// resolve applies the record page's form. It refuses a decision that
// validateDecision refuses (no reason, an empty or unparsable body on
// succeeded …), and one on a record that changed since the page was
// loaded (the form's version is not the record's now). A succeeded or
// failed decision is applied only when the form carries the hash of the
// result previewed on the page: without it, or when what would be
// recorded differs from it, the page shows the preview again and records
// nothing. The decision then goes through Config.Decide with the fence as
// loaded, so a change between this check and the write is refused by the
// store too. Only a decider gets here (requireRole).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostForm
	scope, key := f.Get("scope"), f.Get("key")
	bad := func(msg string) { s.showRecord(w, r, sess, scope, key, http.StatusBadRequest, msg, "", nil) }
	d, err := decisionForm(f, sess)
	if err != nil {
		bad(err.Error())
		return
	}
	switch d.As {
	case "succeeded", "failed", "released":
	default:
		bad(msgChoose)
		return
	}
	if d.Reason == "" {
		bad(msgReason)
		return
	}
	fence, err := strconv.ParseInt(f.Get("fence"), 10, 64)
	if err != nil || fence <= 0 {
		bad("The form carries no valid fence; reload the page.")
		return
	}
	d.IfFence = fence
	now := s.cfg.Now()
	cur, err := s.cfg.Store.Get(r.Context(), scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		s.refuse(w, r, http.StatusConflict, "Decision refused: the record is gone",
			"The record for "+strconv.Quote(key)+" no longer exists: someone released it since you loaded the page. Nothing was changed.")
		return
	}
	if err != nil {
		s.refuse(w, r, http.StatusBadGateway, "Store not readable", err.Error())
		return
	}
	if cur.Fence != fence || version(cur, now) != f.Get("version") {
		s.showRecord(w, r, sess, scope, key, http.StatusConflict,
			"Decision refused: the record changed since you loaded the page (it was decided, re-claimed, or its outcome arrived). Nothing was changed. Look at it again below and decide anew.", "", nil)
		return
	}
	pv, _, err := previewDecision(r.Context(), cur, d)
	if err != nil {
		if errors.Is(err, ErrDecision) {
			bad(err.Error())
			return
		}
		s.refuse(w, r, http.StatusInternalServerError, "Preview failed", err.Error())
		return
	}
	switch given := f.Get("preview"); {
	case f.Get("step") == "preview":
		s.showRecord(w, r, sess, scope, key, http.StatusOK, "", "", pv)
		return
	case d.As != "released" && given == "":
		s.showRecord(w, r, sess, scope, key, http.StatusOK,
			"Check what every retry will receive (below), then record the decision.", "", pv)
		return
	case d.As != "released" && given != pv.Hash:
		s.showRecord(w, r, sess, scope, key, http.StatusConflict,
			"Not recorded: the decision changed since its preview. Check the new preview below, then record it.", "", pv)
		return
	}
	if s.audit != nil {
		if err := s.audit.ready(); err != nil {
			s.refuse(w, r, http.StatusServiceUnavailable, "Decision refused: the audit log cannot take it",
				err.Error()+". Nothing was changed: a decision is taken only when it can be logged.")
			return
		}
	}
	rec, err := s.cfg.Decide(r.Context(), d)
	if errors.Is(err, idem.ErrFenced) {
		s.showRecord(w, r, sess, scope, key, http.StatusConflict,
			"Decision refused: the record changed while you decided ("+err.Error()+"). Nothing was changed.", "", nil)
		return
	}
	if err != nil {
		bad("Decision not applied: " + err.Error())
		return
	}
	entry := AuditEntry{At: now.UTC(), Operator: sess.operator, Role: string(sess.role), Scope: scope, Key: key, Decision: d.As,
		Status: d.Status, ContentType: d.ContentType, Result: pv.Hash, Reason: d.Reason, FromFence: fence, Remote: r.RemoteAddr}
	if rec != nil {
		entry.ToFence = rec.Fence
	}
	s.recordDecision(entry)
	if rec == nil {
		http.Redirect(w, r, "/unknown?released="+url.QueryEscape(key), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, recordLink(scope, key)+"&resolved="+url.QueryEscape(d.As), http.StatusSeeOther)
}

// recordDecision logs a decision applied on stderr and, with an audit
// log, appends it there and logs the log's new head (a copy of the head
// kept elsewhere lets idem ui verify-log --anchor detect lines cut from
// the end). The decision stands when the append fails (the store has it);
// the error says the trail missed it. Every page that decides calls it,
// with the entry's Operator and Role from the session.
func (s *Server) recordDecision(e AuditEntry) {
	s.cfg.Logger.Info("idem ui: record decided", "operator", e.Operator, "role", e.Role, "decision", e.Decision, "reason", e.Reason,
		"from_fence", e.FromFence, "to_fence", e.ToFence, "result_sha256", e.Result)
	if s.audit == nil {
		return
	}
	if err := s.audit.append(e); err != nil {
		s.cfg.Logger.Error("idem ui: audit log append failed", "err", err, "operator", e.Operator, "decision", e.Decision, "reason", e.Reason)
		return
	}
	s.cfg.Logger.Info("idem ui: audit log head", "file", s.audit.path, "head", s.audit.lastHead())
}
