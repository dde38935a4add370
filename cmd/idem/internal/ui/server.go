// Package ui is the operator dashboard that `idem ui` serves: an overview
// of a store's records, the unknown records oldest first, and a page per
// record with a form that decides it.
//
// Pages are rendered on the server with html/template from templates
// embedded in the binary, with one embedded stylesheet and one small
// script; nothing is loaded from elsewhere, and the Content-Security-Policy
// says so (default-src 'self', no inline script or style). Every page
// needs a session, made by a login form that checks the token in constant
// time and sets an HttpOnly, SameSite=Strict cookie; every form carries a
// CSRF token bound to the session.
//
// Decisions go through Config.Decide, which idem ui wires to the same
// function as `idem resolve`: fenced, logged with who and why. The form
// carries the record's version as the page showed it, and a decision on a
// record that changed since is refused.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Decision is an operator's decision on one record, as the resolve form
// posts it.
type Decision struct {
	Scope, Key string
	// As is "succeeded", "failed" or "released".
	As string
	// Status is the HTTP status a succeeded/failed record replays; 0 lets
	// the decider choose (200 or 500).
	Status int
	// Body is the body (or value) replayed; HasBody says one was given.
	Body        []byte
	HasBody     bool
	ContentType string
	// Reason is why; Operator is who. Both are required.
	Reason, Operator string
	// IfFence is the record's fence as the page showed it: the decision
	// applies only while the record still has it.
	IfFence int64
}

// Config configures [New].
type Config struct {
	// Store holds the records shown. Required.
	Store idem.Store
	// Operators are the people who may log in, each with their own
	// password and role (an operators file, [ParseOperators]). Either
	// Operators or Token is required, not both.
	Operators []Operator
	// Token is the one shared secret the login form asks for when there
	// are no Operators, at least 16 bytes. Whoever holds it logs in under
	// any name they type, so the audit log records that name as
	// "token:NAME": nothing verified it.
	Token []byte
	// Decide applies a decision (idem ui passes the function behind
	// `idem resolve`). It returns the new record, or nil when released.
	// Required.
	Decide func(ctx context.Context, d Decision) (*idem.Record, error)
	// Operator names whoever decides through this server in the audit
	// trail, with the shared Token only (recorded as "token:NAME").
	// Defaults to empty: the login form asks each operator's name.
	Operator string
	// MetricsURL is a proxy's /metrics (Prometheus text) sampled for the
	// outcome chart and the duplicate ratio. Defaults to empty: the chart
	// is drawn from the store's records.
	MetricsURL string
	// MetricsEvery is how often MetricsURL is sampled. Defaults to 15s.
	MetricsEvery time.Duration
	// ReconcileReport is a file written by `idem reconcile --json`, shown
	// on the overview. Defaults to empty: none.
	ReconcileReport string
	// AuditLog is a file to which every decision is appended as a JSON
	// line (who, why, what, fences), and from which a record's page shows
	// its past decisions. Defaults to empty: decisions are only logged.
	AuditLog string
	// Logger receives the server's log lines. Defaults to slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a login lasts. Defaults to 12h.
	SessionTTL time.Duration
	// PageSize is how many unknown records a page lists. Defaults to 50.
	PageSize int
	// AllowRemote accepts requests whose Host is not a loopback name.
	// Defaults to false: a page asked for by another name (DNS
	// rebinding) is refused.
	AllowRemote bool
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Provider, when set, is asked what it did for a record's forwarded key
	// (idem ui --provider-url: the reconciler's HTTP lookup), on the
	// record's page and for a bulk succeeded decision. Defaults to none.
	Provider reconcile.Provider
	// RunningEvery is how often the in_progress records are listed in the
	// background, so that a page finds those whose lease has passed (unknown
	// to every reader) without walking the store: on PostgreSQL, which
	// keeps no index on them, that walk reads every record. A record whose
	// lease ran out shows on the unknown list within this interval (a
	// stored unknown one at once). Defaults to 10s; negative lists them
	// with each page instead.
	RunningEvery time.Duration
}

// Errors of [New].
var (
	ErrConfig = errors.New("ui: invalid configuration")
)

// Server is the dashboard's http.Handler.
type Server struct {
	cfg      Config
	tmpl     map[string]*template.Template
	mux      *http.ServeMux
	sessions sessions
	metrics  *sampler
	audit    *auditLog
	stop     context.CancelFunc
	wg       sync.WaitGroup
	// running is the latest in_progress snapshot; nil when pages list them
	// live (RunningEvery < 0).
	running atomic.Pointer[snapshot]
	// decided holds what this process decided since that snapshot.
	decided decided

	// operators are Config.Operators by name; nil with the shared token.
	operators map[string]Operator
	// dummyHash is checked for a login name no operator has.
	dummyHash []byte
}

// New checks cfg, fills its defaults and returns the server. Close stops
// its metrics sampler.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: Store is required", ErrConfig)
	case len(cfg.Operators) == 0 && len(cfg.Token) < 16:
		return nil, fmt.Errorf("%w: Token must be at least 16 bytes, got %d", ErrConfig, len(cfg.Token))
	case cfg.Decide == nil:
		return nil, fmt.Errorf("%w: Decide is required", ErrConfig)
	}
	if cfg.MetricsEvery <= 0 {
		cfg.MetricsEvery = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RunningEvery == 0 {
		cfg.RunningEvery = 10 * time.Second
	}
	tm, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tmpl: tm, sessions: sessions{m: map[string]*session{}, ttl: cfg.SessionTTL, now: cfg.Now}}
	if err := s.initAuth(); err != nil {
		return nil, err
	}
	if cfg.AuditLog != "" {
		s.audit = &auditLog{path: cfg.AuditLog}
		if err := s.audit.check(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if cfg.MetricsURL != "" {
		s.metrics = newSampler(cfg.MetricsURL, 120)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.metrics.run(ctx, cfg.MetricsEvery, cfg.Logger) }()
	}
	if cfg.RunningEvery > 0 {
		s.cfg.Decide = overlaid(&s.decided, cfg.Now, cfg.Decide)
		s.refreshRunning(ctx) // the first pages see them too
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(cfg.RunningEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.refreshRunning(ctx)
				}
			}
		}()
	}
	s.routes()
	return s, nil
}

// refreshRunning replaces the in_progress snapshot. When the store cannot
// be listed the previous snapshot stays (a page says so only if the store
// fails it too); before any snapshot, pages list in_progress records live.
func (s *Server) refreshRunning(ctx context.Context) {
	sn, cut, err := takeSnapshot(ctx, s.cfg.Store, s.cfg.Now())
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("idem ui: in_progress records could not be listed; the unknown list keeps the last snapshot", "err", err)
		}
		return
	}
	if cut {
		s.cfg.Logger.Warn("idem ui: more in_progress records than the dashboard tracks; the oldest are shown", "max", maxRunning)
	}
	s.running.Store(sn)
	s.decided.forget(sn.at)
}

// Close stops the background sampling of MetricsURL and of the
// in_progress records.
func (s *Server) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /favicon.ico", http.NotFound) // the pages name /static/favicon.svg
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.Handle("POST /logout", s.authed(s.logout))
	m.Handle("GET /{$}", s.authed(s.overview))
	m.Handle("GET /unknown", s.authed(s.unknownList))
	m.Handle("GET /record", s.authed(s.recordPage))
	m.Handle("POST /record/resolve", s.authed(s.requireRole(RoleDecider, s.resolve)))
	m.Handle("GET /records", s.authed(s.recordsList))
	m.Handle("GET /record/lookup", s.authed(s.lookupPage))
	m.Handle("POST /bulk/preview", s.authed(s.requireRole(RoleDecider, s.bulkPreview)))
	m.Handle("POST /bulk/apply", s.authed(s.requireRole(RoleDecider, s.bulkApply)))
	s.mux = m
}

// ServeHTTP implements http.Handler: security headers on every answer,
// then the host check, then the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: browsers then send "Origin: null" on same-origin POSTs
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !s.cfg.AllowRemote && !loopbackHost(r.Host) {
		http.Error(w, "idem ui answers only to a loopback host name (127.0.0.1, [::1], localhost)", http.StatusMisdirectedRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface, so that a page fetched through another name (a DNS
// rebinding attack) is refused.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether a listen address binds only the loopback
// interface (127.0.0.0/8, ::1 or localhost); an empty host binds every
// interface and is not.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return loopbackHost(host)
}
