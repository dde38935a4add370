package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

func promHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// proxyHandler is the idempotency middleware in front of a reverse proxy to
// the upstream.
func proxyHandler(eng *idem.Engine, o proxyOpts, p *plan, log *slog.Logger) (http.Handler, error) {
	req := idemhttp.Optional
	if o.requireKey {
		req = idemhttp.Required
	}
	scope := idemhttp.GlobalScope
	if o.scopeHeader != "" {
		scope = idemhttp.HeaderScope(o.scopeHeader)
	}
	mw, err := idemhttp.New(eng, idemhttp.Config{
		Scope:           scope,
		Rules:           []idemhttp.Rule{{Methods: p.methods, Requirement: req}},
		MaxBody:         o.maxBody,
		MaxResponse:     o.maxResponse,
		ReleaseStatuses: p.release,
		Logger:          log,
	})
	if err != nil {
		return nil, err
	}
	return mw.Handler(newUpstream(p, log)), nil
}

// sendState records whether any part of the request reached the upstream.
type sendState struct{ sent atomic.Bool }

type sendKey struct{}

// newUpstream returns the reverse proxy. What happens when the upstream
// fails depends on whether the request was sent:
//   - not sent (connection refused, DNS): nothing was applied, so the key
//     is released and the client gets 502;
//   - sent (no response headers within p.upstreamTimeout, reset,
//     cancelled): it may have been applied, so the record becomes unknown
//     and the client gets 504, then 409 on retries.
func newUpstream(p *plan, log *slog.Logger) http.Handler {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.ResponseHeaderTimeout = p.upstreamTimeout
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.upstream)
			pr.SetXForwarded()
			if idemhttp.AttemptFrom(pr.In.Context()) != nil {
				// A protected request's key is not forwarded: Go's HTTP
				// transport treats a request carrying Idempotency-Key or
				// X-Idempotency-Key as safe to resend on a broken
				// keep-alive connection, which could deliver it to the
				// upstream twice under one claim. Requests the proxy does
				// not protect pass through untouched.
				pr.Out.Header.Del(idemhttp.HeaderName)
				pr.Out.Header.Del("X-Idempotency-Key")
			}
			pr.Out.GetBody = nil
		},
		Transport:     tracingTransport{base},
		FlushInterval: 100 * time.Millisecond,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st, _ := r.Context().Value(sendKey{}).(*sendState)
			if st != nil && st.sent.Load() {
				idemhttp.MarkUnknown(r.Context())
				log.Warn("idem proxy: upstream failed after the request was sent; outcome unknown", "err", err)
				p := &idemhttp.Problem{Type: idemhttp.TypeUpstreamTimeout, Title: "upstream did not answer", Status: http.StatusGatewayTimeout,
					Detail: "the request was sent upstream but no answer came back; it may have been applied, so retries with this key get 409 until it is resolved"}
				idemhttp.WriteProblem(w, p)
				return
			}
			idemhttp.ReleaseKey(r.Context())
			log.Warn("idem proxy: upstream unreachable; request not sent", "err", err)
			idemhttp.WriteProblem(w, &idemhttp.Problem{Type: idemhttp.TypeUpstreamUnreachable, Title: "upstream unreachable", Status: http.StatusBadGateway,
				Detail: "the request could not be sent upstream; nothing was applied and it may be retried with the same key"})
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), sendKey{}, &sendState{}))
		rp.ServeHTTP(w, r)
	})
}

// tracingTransport marks the request as sent once its headers were written
// to a connection.
type tracingTransport struct{ base http.RoundTripper }

func (t tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if st, ok := req.Context().Value(sendKey{}).(*sendState); ok {
		trace := &httptrace.ClientTrace{WroteHeaders: func() { st.sent.Store(true) }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	return t.base.RoundTrip(req)
}
