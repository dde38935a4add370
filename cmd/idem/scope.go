package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/idemkit/idem/idemhttp"
)

// scopeUsage names the proxy's three scope modes, for the error that asks
// for one.
const scopeUsage = "--scope-header NAME (a principal set by a trusted gateway), --scope-jwt --jwks FILE|URL (a verified bearer token's claim) or --global-scope (every caller shares one namespace)"

// scopeMode is how the proxy scopes keys: by a trusted header, by the
// claims of a verified bearer token, or globally.
type scopeMode int

const (
	scopeByHeader scopeMode = iota + 1
	scopeByJWT
	scopeGlobal
)

// scopePlan is the validated form of the scope flags.
type scopePlan struct {
	mode     scopeMode
	header   string   // --scope-header
	jwks     string   // --jwks: a file path or an http(s) URL
	jwksURL  bool     // jwks is a URL
	claims   []string // --scope-claim, split
	audience string   // --jwt-audience
}

// planScope validates the scope flags: exactly one mode, and the JWT
// flags only with --scope-jwt.
func (o *proxyOpts) planScope() (*scopePlan, error) {
	var modes []string
	if o.scopeHeader != "" {
		modes = append(modes, "--scope-header")
	}
	if o.scopeJWT {
		modes = append(modes, "--scope-jwt")
	}
	if o.globalScope {
		modes = append(modes, "--global-scope")
	}
	switch len(modes) {
	case 0:
		return nil, errors.New("a scope mode is required: " + scopeUsage)
	case 1:
	default:
		return nil, fmt.Errorf("%s cannot be combined: choose one scope mode", strings.Join(modes, " and "))
	}
	sp := &scopePlan{}
	if !o.scopeJWT {
		for _, name := range []string{"jwks", "scope-claim", "jwt-audience"} {
			if o.set[name] {
				return nil, fmt.Errorf("--%s applies only with --scope-jwt", name)
			}
		}
	}
	switch {
	case o.globalScope:
		sp.mode = scopeGlobal
	case o.scopeHeader != "":
		sp.mode = scopeByHeader
		if !isToken(o.scopeHeader) {
			return nil, fmt.Errorf("--scope-header: %q is not a header field name", o.scopeHeader)
		}
		switch strings.ToLower(o.scopeHeader) {
		case "authorization", "proxy-authorization", "cookie":
			return nil, fmt.Errorf("--scope-header %s would scope keys by a credential, which changes when it is refreshed (and a retry after a refresh would run again): use --scope-jwt for bearer tokens, or a header naming the principal set by a trusted gateway", o.scopeHeader)
		}
		sp.header = o.scopeHeader
	default:
		sp.mode = scopeByJWT
		if o.jwks == "" {
			return nil, errors.New("--scope-jwt needs --jwks FILE|URL, the JSON Web Key Set that signs the tokens")
		}
		sp.jwks = o.jwks
		if strings.HasPrefix(o.jwks, "http://") || strings.HasPrefix(o.jwks, "https://") {
			u, err := url.Parse(o.jwks)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("--jwks %q is not a URL", o.jwks)
			}
			if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
				return nil, fmt.Errorf("--jwks %s: a key set fetched over plain http can be replaced on the way; use https (http is accepted for loopback only)", o.jwks)
			}
			sp.jwksURL = true
		}
		for _, c := range strings.Split(o.scopeClaim, ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				return nil, fmt.Errorf("--scope-claim %q: empty claim name", o.scopeClaim)
			}
			if slices.Contains(sp.claims, c) {
				return nil, fmt.Errorf("--scope-claim %q: %s is named twice", o.scopeClaim, c)
			}
			sp.claims = append(sp.claims, c)
		}
		sp.audience = o.jwtAudience
	}
	return sp, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// scopeFunc builds the middleware's ScopeFunc. For --scope-jwt it loads
// the key set: a file is read now, a URL fetched now (start-up fails if it
// cannot be) and refreshed in the background until ctx ends.
func (sp *scopePlan) scopeFunc(ctx context.Context, log *slog.Logger) (idemhttp.ScopeFunc, error) {
	switch sp.mode {
	case scopeByHeader:
		return idemhttp.TrustedHeaderScope(sp.header), nil
	case scopeByJWT:
		var (
			v   *jwtVerifier
			err error
		)
		if sp.jwksURL {
			v, err = newJWTVerifierURL(ctx, sp.jwks, sp.audience, log)
		} else {
			var b []byte
			if b, err = os.ReadFile(sp.jwks); err != nil {
				return nil, fmt.Errorf("--jwks: %w", err)
			}
			v, err = newJWTVerifierJSON(b, sp.audience)
		}
		if err != nil {
			return nil, err
		}
		return idemhttp.BearerScope(v.verify, sp.claims...), nil
	}
	return idemhttp.GlobalScope, nil
}

// describe says, for the start-up log, how keys are scoped.
func (sp *scopePlan) describe() []any {
	switch sp.mode {
	case scopeByHeader:
		return []any{"scope", "header", "scope_header", http.CanonicalHeaderKey(sp.header)}
	case scopeByJWT:
		return []any{"scope", "jwt", "scope_claims", strings.Join(sp.claims, ","), "jwks", sp.jwks}
	}
	return []any{"scope", "global"}
}
