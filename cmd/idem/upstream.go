package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	mw, err := idemhttp.New(eng, idemhttp.Config{
		Scope:           p.scopeFn,
		DigestSecret:    p.digestSecret,
		Rules:           []idemhttp.Rule{{Methods: p.methods, Requirement: req}},
		MaxBody:         o.maxBody,
		MaxResponse:     o.maxResponse,
		WriteTimeout:    p.writeTimeout,
		ReleaseStatuses: p.release,
		Compat:          p.compat,
		RecordHeaders:   o.recordHeaders,
		Intent:          proxyIntent(o.intent),
		ScopeQuota:      p.quota,
		Logger:          log,
	})
	if err != nil {
		return nil, err
	}
	p.forwardKey = o.forwardKey
	return mw.Handler(newUpstream(p, log)), nil
}

// sendState records how far a protected request's upstream exchange got.
type sendState struct {
	sent atomic.Bool // some of the request reached a connection
	// answered is set once the response headers arrived.
	answered atomic.Bool
}

type sendKey struct{}

// errUpstreamSwitched is a protected request's upstream answering 101.
var errUpstreamSwitched = errors.New("the upstream switched protocols")

// newUpstream returns the reverse proxy.
//
// A protected request's upstream call runs under the context the
// middleware gives its handler — the engine's effect context, which the
// client's leaving does not cancel — bounded by p.upstreamTimeout for the
// whole exchange, and its response (headers and body up to
// p.maxResponse) is read in full here, before any of it is written: the
// middleware then records it and only after that writes it to the client.
// Nothing ties the call to the client's connection (the ResponseWriter the
// proxy writes to is the middleware's, which has no CloseNotify).
//
// What happens when the upstream fails depends on whether the request was
// sent:
//   - not sent (connection refused, DNS): nothing was applied, so the key
//     is released and the client gets 502;
//   - sent (no complete response within p.upstreamTimeout, reset, a 101):
//     it may have been applied, so the record becomes unknown and the
//     client gets 504, then 409 on retries.
func newUpstream(p *plan, log *slog.Logger) http.Handler {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.ResponseHeaderTimeout = p.upstreamTimeout
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.upstream)
			pr.SetXForwarded()
			if idemhttp.AttemptFrom(pr.In.Context()) != nil {
				// Go's HTTP transport treats a request carrying
				// Idempotency-Key or X-Idempotency-Key (canonical header
				// names) as safe to resend on a broken keep-alive
				// connection, which could deliver it to the upstream twice
				// under one claim. So a protected request's key goes
				// upstream under the lower-case name, which the transport
				// does not look up and HTTP treats as the same field
				// (RFC 9110 §5.1), or not at all with --forward-key=false.
				// Requests the proxy does not protect pass through untouched.
				v := pr.In.Header.Get(idemhttp.HeaderName)
				pr.Out.Header.Del(idemhttp.HeaderName)
				pr.Out.Header.Del("X-Idempotency-Key")
				if p.forwardKey && v != "" {
					pr.Out.Header["idempotency-key"] = []string{v}
				}
			}
			pr.Out.GetBody = nil
		},
		Transport:     tracingTransport{base},
		FlushInterval: 100 * time.Millisecond,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ModifyResponse: func(res *http.Response) error {
			st, _ := res.Request.Context().Value(sendKey{}).(*sendState)
			if st == nil || idemhttp.AttemptFrom(res.Request.Context()) == nil {
				return nil // not protected: streamed as it comes
			}
			st.answered.Store(true)
			if res.StatusCode == http.StatusSwitchingProtocols {
				return errUpstreamSwitched
			}
			return readResponse(res, p.maxResponse)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st, _ := r.Context().Value(sendKey{}).(*sendState)
			if st != nil && st.sent.Load() {
				idemhttp.MarkUnknown(r.Context())
				detail := "the request was sent upstream but no answer came back"
				if st.answered.Load() {
					detail = "the request was sent upstream and its response began but did not arrive in full"
				}
				if errors.Is(err, errUpstreamSwitched) {
					detail = "the request was sent upstream, which answered 101 Switching Protocols: a protected request cannot switch protocols"
				}
				a := idemhttp.AttemptFrom(r.Context())
				log.Warn("idem proxy: upstream failed after the request was sent; outcome unknown",
					"key_hash", idem.LogHash(a.Scope, string(a.Key)), "scope_hash", idem.LogHash(a.Scope, ""),
					"method", r.Method, "path", r.URL.Path, "upstream_answered", st.answered.Load(), "err", err)
				p := &idemhttp.Problem{Type: idemhttp.TypeUpstreamTimeout, Title: "upstream did not answer", Status: http.StatusGatewayTimeout,
					Detail: detail + "; it may have been applied, so retries with this key get 409 until it is resolved"}
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
		ctx := context.WithValue(r.Context(), sendKey{}, &sendState{})
		if idemhttp.AttemptFrom(ctx) != nil && p.upstreamTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, p.upstreamTimeout)
			defer cancel()
		}
		rp.ServeHTTP(w, r.WithContext(ctx))
	})
}

// readResponse reads res's body, up to limit bytes, before anything of it
// is written to the client, so that a body that stalls or breaks fails the
// exchange (ModifyResponse's error goes to the ErrorHandler) instead of
// leaving a truncated response. A larger body is read up to limit and the
// rest streamed: the middleware records it as too large.
func readResponse(res *http.Response, limit int64) error {
	body := res.Body
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return fmt.Errorf("reading the upstream's response body: %w", err)
	}
	if int64(len(b)) > limit {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), body), body}
		return nil
	}
	_ = body.Close()
	res.Body = io.NopCloser(bytes.NewReader(b))
	res.ContentLength = int64(len(b))
	return nil
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
