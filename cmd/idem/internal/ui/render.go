package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var pages = []string{"login", "overview", "unknown", "record", "refused", "records", "bulk", "lookup"}

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"age":        humanAge,
		"ts":         func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"shortScope": shortScope,
		"thousands":  thousands,
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

// render executes a page into a buffer first, so that a template error
// becomes a 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, status int, page string, data map[string]any) {
	if data["Operator"] == nil {
		data["Operator"] = ""
	}
	// With the shared token, every page says that names are not verified.
	data["TokenBanner"] = s.tokenMode() && page != "login"
	var buf bytes.Buffer
	if err := s.tmpl[page].Execute(&buf, data); err != nil {
		s.cfg.Logger.Error("idem ui: template", "page", page, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refuse answers with a page that says what was refused and why.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, title, why string) {
	data := map[string]any{"Title": title, "Why": why, "Status": status, "Back": safeNext(r.Referer())}
	if sess, ok := r.Context().Value(sessionKey{}).(*session); ok {
		data["Operator"] = sess.operator
		data["CSRF"] = sess.csrf
	}
	if ref := r.Referer(); ref != "" {
		if i := strings.Index(ref, r.Host); i >= 0 {
			data["Back"] = safeNext(ref[i+len(r.Host):])
		}
	}
	s.render(w, status, "refused", data)
}

// humanAge prints a duration for people: "3d 4h", "2h 5m", "42s".
func humanAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, (d%time.Hour)/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func shortScope(s string) string {
	switch {
	case s == "":
		return "(global)"
	case len(s) > 12:
		return s[:12] + "…"
	}
	return s
}

// thousands prints n with thin separators: 1 234 567.
func thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteRune(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
