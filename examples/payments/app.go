package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/reconcile"
	"github.com/idemkit/idem/reconcile/httpprovider"
)

// appConfig configures the payments service.
type appConfig struct {
	Provider   string        // the card provider's base URL
	Redrivable bool          // the provider honours idempotency keys
	Lease      time.Duration // how long an attempt holds a key without a heartbeat
	Timeout    time.Duration // bounds one provider call
	// ReconcileEvery is the reconciler's interval once started.
	ReconcileEvery time.Duration
	Clock          func() time.Time
}

// app is the service with its recovery hook and reconciler.
type app struct {
	eng  *idem.Engine
	svc  *service
	rec  *reconcile.Recoverer
	reco *reconcile.Reconciler
}

func newApp(st idem.Store, cfg appConfig) (*app, error) {
	eng, err := idem.New(st, idem.Config{TTL: 7 * 24 * time.Hour, Lease: cfg.Lease, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	lookup, err := httpprovider.New(httpprovider.Config{URLTemplate: cfg.Provider + "/entries/{key}", ListURL: cfg.Provider + "/entries"})
	if err != nil {
		return nil, err
	}
	// The provider's entry is exactly what the service records on success,
	// so a recovered intent replays like one that never lost its answer.
	result := func(a reconcile.Applied) ([]byte, error) { return a.Result, nil }
	hook := reconcile.Hook{Provider: lookup, SettlementWindow: time.Minute, Result: result}
	rec, err := reconcile.NewRecoverer(eng, reconcile.RecovererConfig{Clock: cfg.Clock,
		Hooks: map[string]reconcile.Hook{"charge": hook, "refund": hook}})
	if err != nil {
		return nil, err
	}
	reco, err := reconcile.New(eng, lookup, reconcile.Config{SettlementWindow: time.Minute, Result: result,
		Clock: cfg.Clock, Interval: cfg.ReconcileEvery})
	if err != nil {
		return nil, err
	}
	svc := &service{eng: eng, provider: cfg.Provider, client: &http.Client{}, redrivable: cfg.Redrivable, timeout: cfg.Timeout}
	return &app{eng: eng, svc: svc, rec: rec, reco: reco}, nil
}

// handler serves the payments API and two admin routes that run recovery
// and reconciliation now (they also run on an interval in main).
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", a.svc.routes())
	mux.HandleFunc("POST /admin/recover", func(w http.ResponseWriter, r *http.Request) {
		counts, err := a.rec.RunOnce(r.Context())
		writeJSON(w, map[string]any{"decisions": counts, "error": errText(err)})
	})
	mux.HandleFunc("POST /admin/reconcile", func(w http.ResponseWriter, r *http.Request) {
		rep, err := a.reco.RunOnce(r.Context())
		writeJSON(w, map[string]any{"report": rep, "error": errText(err)})
	})
	return mux
}

// background runs recovery every interval until ctx ends.
func (a *app) background(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = a.rec.RunOnce(ctx)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
