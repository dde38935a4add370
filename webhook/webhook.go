// Package webhook receives provider webhooks (payment, shipping, …) so that
// each event's effect happens once however often the provider redelivers it.
//
// It verifies nothing itself: signature checks stay the user's, in
// middleware placed before this handler. It reads the provider's event id
// (a header or a top-level JSON field; [Config].EventID), fingerprints the
// body, and runs the effect under an [idem.Engine]. Concurrent deliveries of
// one event wait for the first and replay its outcome.
//
// Status codes say whether the provider should redeliver:
//
//	200  processed now, or a duplicate replayed (Idempotent-Replayed: true);
//	     also a recorded failure (Idem-Outcome: failed): redelivering would
//	     only replay it, so the event is acknowledged and the record holds
//	     the failure for an operator
//	202  outcome unknown (Idem-Outcome: unknown): parked for reconciliation
//	400  no usable event id
//	413  body over MaxBody, before anything is claimed
//	422  same event id, different body (Idem-Outcome: mismatch)
//	503  redeliver later: the handler released (nothing happened), the first
//	     delivery is still running past the wait bound, or the store is down
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// Event is one delivery as the handler sees it.
type Event struct {
	// ID is the provider's event id, the key.
	ID string
	// Body is the raw request body.
	Body []byte
	// Request is the incoming request (its body already read).
	Request *http.Request
}

// Handler performs an event's effect. Error semantics are those of
// [idem.Engine.DoBytes]: nil succeeded; [idem.Release] nothing happened
// (503, redeliver); [idem.Unknown] maybe happened (202, parked); other
// errors failed (recorded, 200).
type Handler func(ctx context.Context, ev *Event) error

// Extractor reads an event id from a request and its body.
type Extractor func(r *http.Request, body []byte) (string, error)

// Header returns an [Extractor] reading the id from header name.
func Header(name string) Extractor {
	return func(r *http.Request, _ []byte) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("webhook: no %s header", name)
	}
}

// JSONField returns an [Extractor] reading the id from a top-level string
// field of a JSON body (Stripe's "id", for example).
func JSONField(name string) Extractor {
	return func(_ *http.Request, body []byte) (string, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return "", fmt.Errorf("webhook: body is not a JSON object: %w", err)
		}
		var s string
		if err := json.Unmarshal(m[name], &s); err != nil || s == "" {
			return "", fmt.Errorf("webhook: no string field %q", name)
		}
		return s, nil
	}
}

// Config configures [New].
type Config struct {
	// Engine runs the effects. Required.
	Engine *idem.Engine
	// EventID reads the provider's event id. Required.
	EventID Extractor
	// Scope is the key's scope: one per provider (and per account when one
	// endpoint serves several). Defaults to "webhook".
	Scope func(r *http.Request) string
	// Operation names the operation in metrics and logs. Defaults to
	// "webhook".
	Operation string
	// MaxBody is the largest body accepted, in bytes. Defaults to 1 MiB.
	MaxBody int64
	// Policy is passed to the engine; InFlight is always InFlightWait, so
	// concurrent deliveries replay the first one's outcome. Defaults to
	// the engine's policy.
	Policy idem.Policy
}

type receiver struct {
	cfg Config
	h   Handler
}

// New returns an http.Handler that runs h once per event.
func New(cfg Config, h Handler) (http.Handler, error) {
	if cfg.Engine == nil || cfg.EventID == nil || h == nil {
		return nil, errors.New("webhook: New: Config.Engine, Config.EventID and a handler are required")
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("webhook: Config.MaxBody must not be negative, got %d", cfg.MaxBody)
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Scope == nil {
		cfg.Scope = func(*http.Request) string { return "webhook" }
	}
	if cfg.Operation == "" {
		cfg.Operation = "webhook"
	}
	cfg.Policy.InFlight = idem.InFlightWait
	return &receiver{cfg: cfg, h: h}, nil
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rc.cfg.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			reply(w, http.StatusRequestEntityTooLarge, "too_large", "", 0)
			return
		}
		reply(w, http.StatusBadRequest, "unreadable_body", "", 0)
		return
	}
	id, err := rc.cfg.EventID(r, body)
	if err == nil {
		err = idem.ValidateKey(id)
	}
	if err != nil {
		reply(w, http.StatusBadRequest, "invalid_event_id", "", 0)
		return
	}
	ev := &Event{ID: id, Body: body, Request: r}
	req := idem.Request{Scope: rc.cfg.Scope(r), Key: idem.Key(id), Fingerprint: idem.NewFingerprint(body),
		Operation: rc.cfg.Operation, Policy: rc.cfg.Policy}
	res, err := rc.cfg.Engine.DoBytes(r.Context(), req, func(ctx context.Context, _ *idem.Attempt) ([]byte, error) {
		return nil, rc.h(ctx, ev)
	})
	respond(w, id, res, err)
}

func respond(w http.ResponseWriter, id string, res idem.Result, err error) {
	var ife *idem.InFlightError
	switch {
	case err == nil:
		if res.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		reply(w, http.StatusOK, "succeeded", id, 0)
	case errors.Is(err, idem.ErrRecordedFailure):
		if res.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		reply(w, http.StatusOK, "failed", id, 0)
	case errors.Is(err, idem.ErrMismatch):
		reply(w, http.StatusUnprocessableEntity, "mismatch", id, 0)
	case errors.Is(err, idem.ErrUnknownOutcome):
		reply(w, http.StatusAccepted, "unknown", id, 0)
	case errors.As(err, &ife):
		reply(w, http.StatusServiceUnavailable, "in_flight", id, int(ife.RetryAfter.Seconds()+0.999))
	case errors.Is(err, idem.ErrReleased):
		reply(w, http.StatusServiceUnavailable, "released", id, 1)
	default:
		reply(w, http.StatusServiceUnavailable, "unavailable", id, 1)
	}
}

func reply(w http.ResponseWriter, status int, outcome, id string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idem-Outcome", outcome)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"event_id": id, "outcome": outcome})
}
