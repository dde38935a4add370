package ui

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
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
	s.showRecord(w, r, sess, scope, key, http.StatusOK, "", q.Get("resolved"))
}

func (s *Server) showRecord(w http.ResponseWriter, r *http.Request, sess *session, scope, key string, status int, problem, resolved string) {
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
	s.render(w, status, "record", map[string]any{
		"Title": "Record " + key, "Operator": sess.operator, "CSRF": sess.csrf, "Nav": "unknown",
		"R": rw, "Rec": rec, "Response": toResponse(rec), "History": history(rec, audit, now),
		"Decidable": rw.State == string(idem.StateUnknown), "Problem": problem, "Resolved": resolved,
		"AuditOff": s.audit == nil, "AuditProblem": auditProblem, "Form": r.PostForm,
		"Fingerprint": rec.Fingerprint.String(), "Mark": string(rec.Mark),
	})
}

// resolve applies the record page's form. It refuses a decision without
// a reason, and one on a record that changed since the page was loaded
// (the form's version is not the record's now); the decision then goes
// through Config.Decide with the fence as loaded, so a change between this
// check and the write is refused by the store too.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostForm
	scope, key := f.Get("scope"), f.Get("key")
	d := Decision{Scope: scope, Key: key, As: f.Get("as"), Reason: strings.TrimSpace(f.Get("reason")),
		Operator: sess.operator, ContentType: strings.TrimSpace(f.Get("content_type"))}
	bad := func(msg string) { s.showRecord(w, r, sess, scope, key, http.StatusBadRequest, msg, "") }
	switch d.As {
	case "succeeded", "failed", "released":
	default:
		bad("Choose a decision: succeeded, failed or released.")
		return
	}
	if d.Reason == "" {
		bad("A reason is required: every decision is logged with who took it and why.")
		return
	}
	if v := strings.TrimSpace(f.Get("status")); v != "" && d.As != "released" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 || n > 599 {
			bad("The status must be a final HTTP status (200–599).")
			return
		}
		d.Status = n
	}
	if body := f.Get("body"); body != "" && d.As != "released" {
		d.Body, d.HasBody = []byte(body), true
	}
	if d.As == "released" {
		d.ContentType = ""
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
			"Decision refused: the record changed since you loaded the page (it was decided, re-claimed, or its outcome arrived). Nothing was changed. Look at it again below and decide anew.", "")
		return
	}
	rec, err := s.cfg.Decide(r.Context(), d)
	if errors.Is(err, idem.ErrFenced) {
		s.showRecord(w, r, sess, scope, key, http.StatusConflict,
			"Decision refused: the record changed while you decided ("+err.Error()+"). Nothing was changed.", "")
		return
	}
	if err != nil {
		bad("Decision not applied: " + err.Error())
		return
	}
	entry := AuditEntry{At: now.UTC(), Operator: sess.operator, Scope: scope, Key: key, Decision: d.As,
		Status: d.Status, Reason: d.Reason, FromFence: fence, Remote: r.RemoteAddr}
	if rec != nil {
		entry.ToFence = rec.Fence
	}
	s.cfg.Logger.Info("idem ui: record decided", "operator", sess.operator, "decision", d.As, "reason", d.Reason,
		"from_fence", fence, "to_fence", entry.ToFence)
	if s.audit != nil {
		if err := s.audit.append(entry); err != nil {
			// The decision stands (the store has it); say the trail missed it.
			s.cfg.Logger.Error("idem ui: audit log append failed", "err", err, "operator", sess.operator, "decision", d.As, "reason", d.Reason)
		}
	}
	if rec == nil {
		http.Redirect(w, r, "/unknown?released="+url.QueryEscape(key), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, recordLink(scope, key)+"&resolved="+url.QueryEscape(d.As), http.StatusSeeOther)
}
