package ui

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/crypto/bcrypt"
)

// Role is what an operator may do in the dashboard.
type Role string

// The roles. A decider may do everything a viewer may.
const (
	// RoleViewer sees every page but decides nothing: the record page
	// shows no form, and a decision posted anyway is refused (403).
	RoleViewer Role = "viewer"
	// RoleDecider also decides unknown records. It is the role of an
	// operators file line that names none, and of everyone who logs in
	// with the shared token.
	RoleDecider Role = "decider"
)

// rank orders the roles: a session may do what its role's rank reaches.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleDecider:
		return 2
	}
	return 0
}

// Operator is one person who may log in with a name and a password, as a
// line of an operators file names them.
type Operator struct {
	// Name is what the login form's operator field takes and what the
	// audit log records.
	Name string
	// Hash is the bcrypt hash of the password ([HashPassword]).
	Hash []byte
	// Role is what the operator may do.
	Role Role
}

// PasswordCost is the bcrypt cost [HashPassword] uses: about a quarter
// of a second a check on a current server core, which a login can afford
// and a guesser cannot.
const PasswordCost = 12

// Password bounds: bcrypt reads at most 72 bytes, and a longer password
// would be cut silently, so it is refused.
const (
	MinPassword = 8
	MaxPassword = 72
)

// ErrPassword: a password is too short or too long for [HashPassword].
var ErrPassword = errors.New("ui: unusable password")

// HashPassword returns the bcrypt hash of password at [PasswordCost], for
// an operators file line ([OperatorLine]).
func HashPassword(password []byte) ([]byte, error) {
	if len(password) < MinPassword || len(password) > MaxPassword {
		return nil, fmt.Errorf("%w: a password has %d to %d bytes, this one %d", ErrPassword, MinPassword, MaxPassword, len(password))
	}
	return bcrypt.GenerateFromPassword(password, PasswordCost)
}

// OperatorLine is the operators file line for op: name:hash:role.
func OperatorLine(op Operator) string {
	return op.Name + ":" + string(op.Hash) + ":" + string(op.Role)
}

// ParseOperators reads an operators file: one operator a line, as
// name:hash or name:hash:role, where hash is a bcrypt hash and role is
// viewer or decider (decider when left out). Blank lines and lines
// starting with # are skipped. A name is 1 to 100 characters without
// white space, control characters or ':'; names are unique. Any other
// line is an error naming its number (never its content: it holds a
// hash).
func ParseOperators(r io.Reader) ([]Operator, error) {
	var out []Operator
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("line %d: want name:hash or name:hash:role (make one with idem ui passwd NAME)", n)
		}
		op := Operator{Name: parts[0], Hash: []byte(parts[1]), Role: RoleDecider}
		if len(parts) == 3 {
			op.Role = Role(parts[2])
		}
		if err := checkOperatorName(op.Name); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if seen[op.Name] {
			return nil, fmt.Errorf("line %d: operator %q is named twice", n, op.Name)
		}
		seen[op.Name] = true
		if op.Role.rank() == 0 {
			return nil, fmt.Errorf("line %d: role %q is neither viewer nor decider", n, op.Role)
		}
		if _, err := bcrypt.Cost(op.Hash); err != nil {
			return nil, fmt.Errorf("line %d: operator %q: not a bcrypt hash (make one with idem ui passwd %s)", n, op.Name, op.Name)
		}
		out = append(out, op)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no operator in the file (add a line made by idem ui passwd NAME)")
	}
	return out, nil
}

// checkOperatorName refuses a name that could not be told apart in the
// audit log or split from its hash.
func checkOperatorName(name string) error {
	if name == "" || len(name) > 100 {
		return fmt.Errorf("an operator's name has 1 to 100 characters, got %d", len(name))
	}
	for _, r := range name {
		if r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("operator name %q holds a character a name may not (':', white space, a control character)", name)
		}
	}
	return nil
}

// CheckOperatorName reports whether name may name an operator (see
// [ParseOperators]).
func CheckOperatorName(name string) error { return checkOperatorName(name) }

// tokenPrefix marks an identity that only the shared token vouches for:
// whoever holds the token typed the rest.
const tokenPrefix = "token:"

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
	// operator is who the audit log names: an operators file's name as
	// verified by the password, or with the shared token "token:" and the
	// name typed at login (or --operator), which nothing verified.
	operator string
	role     Role
	csrf     string
	expires  time.Time
}

// can reports whether the session's role reaches role.
func (ss *session) can(role Role) bool { return ss.role.rank() >= role.rank() && role.rank() > 0 }

// sessions are the logins this process made; a restart logs everyone out.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
}

func (ss *sessions) add(operator string, role Role) (id string, s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, v := range ss.m { // forget expired logins while here
		if now.After(v.expires) {
			delete(ss.m, k)
		}
	}
	id = randomToken()
	s = &session{operator: operator, role: role, csrf: randomToken(), expires: now.Add(ss.ttl)}
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

// tokenMode reports whether logins take the shared token instead of an
// operator's own password.
func (s *Server) tokenMode() bool { return s.operators == nil }

// initAuth checks the login configuration and prepares the operators'
// lookup: either operators with their own passwords, or the shared token;
// never both. With operators, a name that is in no line is checked
// against a dummy hash of the file's highest cost, so that a login takes
// as long for an unknown name as for a wrong password.
func (s *Server) initAuth() error {
	cfg := s.cfg
	if len(cfg.Operators) == 0 {
		return nil // token mode; New checked the token
	}
	if len(cfg.Token) > 0 {
		return fmt.Errorf("%w: Operators and Token exclude each other", ErrConfig)
	}
	if cfg.Operator != "" {
		return fmt.Errorf("%w: Operator applies to the shared token only: with Operators each operator is named by their login", ErrConfig)
	}
	s.operators = make(map[string]Operator, len(cfg.Operators))
	cost := bcrypt.MinCost
	for _, op := range cfg.Operators {
		if err := checkOperatorName(op.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if op.Role.rank() == 0 {
			return fmt.Errorf("%w: operator %q has role %q, neither viewer nor decider", ErrConfig, op.Name, op.Role)
		}
		c, err := bcrypt.Cost(op.Hash)
		if err != nil {
			return fmt.Errorf("%w: operator %q: not a bcrypt hash", ErrConfig, op.Name)
		}
		if _, dup := s.operators[op.Name]; dup {
			return fmt.Errorf("%w: operator %q named twice", ErrConfig, op.Name)
		}
		cost = max(cost, c)
		s.operators[op.Name] = op
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte(randomToken()), cost)
	if err != nil {
		return err
	}
	s.dummyHash = dummy
	return nil
}

// checkPassword returns the operator name and password identify. An
// unknown name costs one bcrypt comparison as a known one does, and is
// refused as a wrong password is.
func (s *Server) checkPassword(name, password string) (Operator, bool) {
	op, known := s.operators[name]
	hash := op.Hash
	if !known {
		hash = s.dummyHash
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	return op, known && err == nil
}

// requireRole lets a request through to h only when the session's role
// reaches role; otherwise it is refused (403) and logged. Every handler
// that changes a record is wrapped in requireRole(RoleDecider, …).
func (s *Server) requireRole(role Role, h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		if !sess.can(role) {
			s.cfg.Logger.Warn("idem ui: refused to a role", "operator", sess.operator, "role", sess.role, "needs", role, "path", r.URL.Path)
			s.refuse(w, r, http.StatusForbidden, "Not allowed",
				"You are logged in as "+sess.operator+" with the role "+string(sess.role)+": only a "+string(role)+" may do this. Nothing was changed.")
			return
		}
		h(w, r, sess)
	}
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
		"TokenMode": s.tokenMode(), "AskName": !s.tokenMode() || s.cfg.Operator == "", "Operator": s.cfg.Operator, "Problem": problem,
	})
}

// failedLoginDelay slows a guesser down; the token's entropy, or bcrypt's
// cost, does the rest.
var failedLoginDelay = 300 * time.Millisecond

// wrongLogin is the one answer to a wrong name or a wrong password: it
// does not say which was wrong.
const wrongLogin = "Wrong operator name or password."

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
	name := strings.TrimSpace(r.PostForm.Get("operator"))
	var operator string
	var role Role
	if s.tokenMode() {
		if !equalSecret([]byte(r.PostForm.Get("token")), s.cfg.Token) {
			time.Sleep(failedLoginDelay)
			s.cfg.Logger.Warn("idem ui: failed login", "remote", r.RemoteAddr)
			s.renderLogin(w, r, http.StatusUnauthorized, "Wrong token.")
			return
		}
		if s.cfg.Operator != "" {
			name = s.cfg.Operator
		}
		if name == "" || len(name) > 100 {
			s.renderLogin(w, r, http.StatusBadRequest, "Give your name (at most 100 characters): every decision you take is logged with it.")
			return
		}
		// Anyone holding the token can type any name: the log says so.
		operator, role = tokenPrefix+name, RoleDecider
	} else {
		op, ok := s.checkPassword(name, r.PostForm.Get("password"))
		if !ok {
			time.Sleep(failedLoginDelay)
			s.cfg.Logger.Warn("idem ui: failed login", "operator", clipName(name), "remote", r.RemoteAddr)
			s.renderLogin(w, r, http.StatusUnauthorized, wrongLogin)
			return
		}
		operator, role = op.Name, op.Role
	}
	id, _ := s.sessions.add(operator, role)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL / time.Second)})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/login", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	s.cfg.Logger.Info("idem ui: login", "operator", operator, "role", role, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// clipName keeps a name typed at a failed login short in the log.
func clipName(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
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
