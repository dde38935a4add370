package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Cookie names. Both are HttpOnly and SameSite=Strict: a page on another
// site can neither read them nor make the browser send them.
const (
	sessionCookie = "idem_ui_session"
	// loginCookie carries the login form's CSRF token (double submit): a
	// login posted from another site has no cookie to match.
	loginCookie = "idem_ui_login"
)

// session is one operator's login.
type session struct {
	operator string
	csrf     string
	expires  time.Time
}

// sessions are the logins this process made; a restart logs everyone out.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
}

func (ss *sessions) add(operator string) (id string, s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, v := range ss.m { // forget expired logins while here
		if now.After(v.expires) {
			delete(ss.m, k)
		}
	}
	id = randomToken()
	s = &session{operator: operator, csrf: randomToken(), expires: now.Add(ss.ttl)}
	ss.m[id] = s
	return id, s
}

func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s == nil || ss.now().After(s.expires) {
		delete(ss.m, id)
		return nil
	}
	return s
}

func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("ui: no randomness: " + err.Error()) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// equalSecret compares two secrets in time that depends on neither their
// contents nor their lengths (both are hashed first).
func equalSecret(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

type sessionKey struct{}

// authed lets a request through only with a live session: a page asked
// for without one redirects to the login form, a form posted without one
// is refused. Forms posted with one must carry its CSRF token and, when
// the browser names it, this server's origin.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			sess = s.sessions.get(c.Value)
		}
		if sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.refuse(w, r, http.StatusForbidden, "Not logged in", "Log in again: your session has ended.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseForm(); err != nil {
				s.refuse(w, r, http.StatusBadRequest, "Form not readable", err.Error())
				return
			}
			if !sameOrigin(r) || !equalSecret([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) {
				s.refuse(w, r, http.StatusForbidden, "Form refused", "The form carried no valid CSRF token (or came from another origin). Reload the page and submit it again.")
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), sess)
	})
}

// maxForm bounds a posted form (a decision's body is at most this).
const maxForm = 1 << 20

// sameOrigin is false when the browser says the request comes from
// another origin. Browsers send Origin on every POST; a client that sends
// none still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	// Keep the browser's login cookie if it has one: another tab, or a
	// request of the page itself, must not invalidate the form shown.
	var tok string
	if c, err := r.Cookie(loginCookie); err == nil && len(c.Value) == 64 {
		tok = c.Value
	} else {
		tok = randomToken()
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: tok, Path: "/login", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	}
	s.render(w, status, "login", map[string]any{
		"Title": "Log in", "CSRF": tok, "Next": safeNext(r.FormValue("next")),
		"AskName": s.cfg.Operator == "", "Operator": s.cfg.Operator, "Problem": problem,
	})
}

// failedLoginDelay slows a guesser down; the token's entropy does the rest.
var failedLoginDelay = 300 * time.Millisecond

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || !equalSecret([]byte(r.PostForm.Get("csrf")), []byte(c.Value)) {
		s.renderLogin(w, r, http.StatusForbidden, "The login form expired or came from elsewhere; try again.")
		return
	}
	if !equalSecret([]byte(r.PostForm.Get("token")), s.cfg.Token) {
		time.Sleep(failedLoginDelay)
		s.cfg.Logger.Warn("idem ui: failed login", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "Wrong token.")
		return
	}
	operator := s.cfg.Operator
	if operator == "" {
		operator = strings.TrimSpace(r.PostForm.Get("operator"))
		if operator == "" || len(operator) > 100 {
			s.renderLogin(w, r, http.StatusBadRequest, "Give your name (at most 100 characters): every decision you take is logged with it.")
			return
		}
	}
	id, _ := s.sessions.add(operator)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL / time.Second)})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/login", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	s.cfg.Logger.Info("idem ui: login", "operator", operator, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this server: a same-origin
// path, never a URL to another host. It refuses, answering "/", anything
// with white space or a control character (browsers strip tabs and line
// breaks from URLs, so "/\t/evil.example" becomes "//evil.example"), a
// backslash (read as a slash: "/\evil"), a scheme-relative ("//host") or
// absolute URL, and anything that does not parse as a path with an
// optional query.
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") {
		return "/"
	}
	for _, r := range next {
		if r <= ' ' || r == 0x7f || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}
