package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/idemkit/idem"
)

// service is the payments API: POST /charges and POST /refunds, each with an
// Idempotency-Key header, backed by an idem engine and a card provider.
type service struct {
	eng      *idem.Engine
	provider string       // the provider's base URL
	client   *http.Client // calls the provider
	// redrivable declares the provider idempotent with the forwarded key,
	// so a retried unknown intent may call it again. Off by default.
	redrivable bool
	timeout    time.Duration // bounds one provider call; past it the outcome is unknown
}

// payment is the request body of both routes. Amount is in minor units.
type payment struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) { s.pay(w, r, "charge") })
	mux.HandleFunc("POST /refunds", func(w http.ResponseWriter, r *http.Request) { s.pay(w, r, "refund") })
	return mux
}

// pay runs one charge or refund intent. The local key is namespaced by
// operation, and so is the key forwarded to the provider (which also holds
// the account), so a charge and a refund sent with the same client key never
// share either.
func (s *service) pay(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	var p payment
	if err != nil || json.Unmarshal(body, &p) != nil || p.Amount <= 0 || len(p.Currency) != 3 {
		problem(w, http.StatusBadRequest, "body must be {order_id, amount > 0 (minor units), currency}")
		return
	}
	account := r.Header.Get("X-Account")
	if account == "" {
		account = "demo"
	}
	key, err1 := idem.DeriveKey(op, 1, r.Header.Get("Idempotency-Key"))
	fwd, err2 := idem.DeriveKey(op, 1, account, r.Header.Get("Idempotency-Key"))
	if err := errors.Join(err1, err2); err != nil {
		problem(w, http.StatusBadRequest, "a valid Idempotency-Key header is required")
		return
	}
	canon, err := idem.CanonicalJSON(body)
	if err != nil {
		problem(w, http.StatusBadRequest, "body is not JSON")
		return
	}
	raw, res, err := idem.Do(r.Context(), s.eng, idem.Request{
		Scope: account, Key: key, Fingerprint: idem.NewFingerprint(canon), Operation: op,
		Intent: &idem.Intent{Operation: op, Amount: p.Amount, Currency: p.Currency, Counterparty: "cardprovider",
			ForwardKey: string(fwd), Fields: map[string]string{"order_id": p.OrderID}},
		Policy: idem.Policy{Redrivable: s.redrivable, InFlight: idem.InFlightReject},
	}, func(ctx context.Context, a *idem.Attempt) (json.RawMessage, error) {
		return s.call(ctx, op, a, p)
	})
	s.answer(w, raw, res, err)
}

// call sends the intent to the provider with the forwarded key. A request
// that never left (connection refused) released nothing; anything after it
// left — a timeout, a dropped connection, a 5xx — is unknown.
func (s *service) call(ctx context.Context, op string, a *idem.Attempt, p payment) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"amount": p.Amount, "currency": p.Currency})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.provider+"/"+op+"s", bytes.NewReader(b))
	if err != nil {
		return nil, idem.Release(err)
	}
	req.Header.Set("Idempotency-Key", a.ForwardKey())
	req.Header.Set("Content-Type", "application/json")
	// net/http retries a request with an Idempotency-Key header by itself
	// when a reused connection drops. That is a re-drive behind idem's back,
	// and a double charge with a provider that ignores the key: only the
	// engine decides re-drives (Policy.Redrivable). No GetBody, no replay.
	req.GetBody = nil
	resp, err := s.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, idem.Release(err) // never reached the provider
		}
		return nil, idem.Unknown(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch {
	case err != nil:
		return nil, idem.Unknown(err)
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		return out, nil
	case resp.StatusCode >= 500:
		return nil, idem.Unknown(fmt.Errorf("provider answered %d", resp.StatusCode))
	}
	return nil, fmt.Errorf("provider refused the %s: %d %s", op, resp.StatusCode, bytes.TrimSpace(out))
}

func (s *service) answer(w http.ResponseWriter, raw json.RawMessage, res idem.Result, err error) {
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(raw)
	case errors.Is(err, idem.ErrMismatch):
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different request")
	case errors.Is(err, idem.ErrInFlight):
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusConflict, "a request with this key is in flight")
	case errors.Is(err, idem.ErrUnknownOutcome):
		w.Header().Set("Retry-After", "5")
		problem(w, http.StatusServiceUnavailable, "the outcome is not known yet; it will be reconciled, retry later")
	case errors.Is(err, idem.ErrRecordedFailure):
		problem(w, http.StatusPaymentRequired, err.Error())
	default:
		problem(w, http.StatusServiceUnavailable, "temporarily unavailable")
	}
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "detail": detail})
}
