package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemmcp"
)

// operatorDecision is an operator's decision on one record, as idem
// resolve takes it from flags and idem ui from a form. Both apply it with
// decide, so that a decision taken in the browser is fenced, audited and
// encoded exactly as one taken in a terminal.
type operatorDecision struct {
	Scope string
	Key   idem.Key
	// As is succeeded, failed or released.
	As string
	// Status is the HTTP status replayed for succeeded/failed; 0 is 200 or
	// 500.
	Status int
	// Body is the body (or, for a record made by an engine caller, the
	// value) replayed; HasBody says whether one was given.
	Body        []byte
	HasBody     bool
	ContentType string
	// Reason and Actor are logged with the resolution: why and who.
	Reason, Actor string
	Force         bool
	// IfFence, when not zero, is the fence as the operator saw it.
	IfFence int64
	// TTL is how long a succeeded/failed resolution replays.
	TTL time.Duration
	// Keys decrypts the record and encrypts the decision when the store's
	// records are encrypted at rest (--encryption-key-file); nil: none.
	Keys *idem.Keyring
}

// decide applies d to the store: an in_progress record whose lease has
// passed is first marked unknown (as every reader treats it), then the
// engine's Resolve decides it — fenced, and logged on log with actor and
// reason. It returns the new record, or nil when released.
func decide(ctx context.Context, st idem.Store, log *slog.Logger, d operatorDecision) (*idem.Record, error) {
	res := idem.Resolution{Force: d.Force, Actor: d.Actor, Reason: d.Reason, IfFence: d.IfFence}
	switch d.As {
	case "released":
		res.Release = true
	case "succeeded", "failed":
		res.As = idem.State(d.As)
	default:
		return nil, fmt.Errorf("a decision must be succeeded, failed or released, got %q", d.As)
	}
	// An operator decides records on whatever store holds them; idem
	// doctor, not resolve, judges whether the store can forget.
	eng, err := idem.New(st, idem.Config{TTL: d.TTL, Logger: log, AllowVolatileStore: true, AllowAsyncReplication: true, Encryption: d.Keys})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	if err := markExpiredUnknown(ctx, st, d.Scope, d.Key); err != nil {
		return nil, err
	}
	if !res.Release {
		cur, err := st.Get(ctx, d.Scope, string(d.Key))
		if errors.Is(err, idem.ErrNotFound) {
			return nil, explained{fmt.Sprintf("no record for key %q in scope %q", d.Key, d.Scope), err}
		}
		if err == nil {
			err = d.Keys.OpenRecord(cur)
		}
		if err != nil {
			return nil, err
		}
		if res.Result, err = resolvedResult(cur, d); err != nil {
			return nil, err
		}
	}
	rec, err := eng.Resolve(ctx, d.Scope, d.Key, res)
	if err != nil {
		if errors.Is(err, idem.ErrNotFound) {
			return nil, explained{fmt.Sprintf("no record for key %q in scope %q", d.Key, d.Scope), err}
		}
		if errors.Is(err, idem.ErrFenced) && d.IfFence != 0 {
			return nil, explained{fmt.Sprintf("record %q moved on from fence %d (decided or re-claimed meanwhile); look at it again with idem get", d.Key, d.IfFence), err}
		}
		if errors.Is(err, idem.ErrFenced) && !d.Force {
			return nil, notUnknown(ctx, st, d.Scope, d.Key, err)
		}
		return nil, err
	}
	return rec, nil
}

// resolvedResult is what an operator's resolution records on rec, in the
// form whatever made rec decodes (idem.EncodeDecision picks the encoder by
// the record's origin): a recorded HTTP response for a record made by
// idemhttp or idem proxy, a gRPC answer, an MCP tool result, or the
// application's value (the body as given, or for a failure the reason) for
// a record made by an engine caller. The flags that fit only one of them
// are refused on the others, in the command's terms.
func resolvedResult(rec *idem.Record, d operatorDecision) ([]byte, error) {
	origin := rec.Origin()
	if origin != idemhttp.Origin && (d.Status != 0 || d.ContentType != "") {
		m, ok := madeBy[origin]
		if !ok {
			m.how, m.result, m.body = fmt.Sprintf("with origin %q", origin), "its result is not an HTTP response", "give --body FILE as that origin reads it"
		}
		return nil, fmt.Errorf("record %q was made %s, not over HTTP: %s, so --status and --content-type do not apply; %s",
			rec.Key, m.how, m.result, m.body)
	}
	if origin == "" && d.As == "succeeded" && !d.HasBody {
		return nil, fmt.Errorf("record %q was made by an application through the engine: --as succeeded needs --body FILE holding the value its retries replay (as the application's codec writes it, JSON by default)", rec.Key)
	}
	dec := idem.Decision{As: idem.State(d.As), Status: d.Status, ContentType: d.ContentType, Message: d.Reason}
	if d.HasBody {
		dec.Body = d.Body
	}
	return idem.EncodeDecision(rec, dec)
}

// madeBy describes, per origin, what made a record and what its retries
// replay, for the messages that refuse a flag that does not fit it.
var madeBy = map[string]struct{ how, result, body string }{
	"": {"by an application through the engine", "its result is the application's value",
		"give --body FILE holding the value as the application's codec writes it (JSON by default)"},
	idemgrpc.Origin: {"over gRPC (idemgrpc)", "its result is a gRPC answer",
		"give --body FILE holding the response message as protojson, or nothing for an empty response"},
	idemmcp.Origin: {"by an MCP tool call (idemmcp)", "its result is a tool result",
		"give --body FILE holding the tool result (JSON) or the text it answers"},
}

// notUnknown explains, in the command's own terms, why Resolve refused a
// record without --force: it names the record's state and the flag.
func notUnknown(ctx context.Context, st idem.Store, scope string, key idem.Key, err error) error {
	rec, gerr := st.Get(ctx, scope, string(key))
	switch {
	case errors.Is(gerr, idem.ErrNotFound):
		return explained{fmt.Sprintf("no record for key %q in scope %q (it was released meanwhile)", key, scope), gerr}
	case gerr != nil:
		return err
	case rec.State == idem.StateInProgress:
		return explained{fmt.Sprintf("record %q is in_progress, not unknown: its request is still running and may finish; --force changes it anyway", key), err}
	}
	return explained{fmt.Sprintf("record %q is %s, not unknown; --force changes a decided record", key, rec.State), err}
}

// markExpiredUnknown writes unknown on an in_progress record whose lease
// has passed, as the engine does when it reads one, so that an operator can
// resolve it without --force.
func markExpiredUnknown(ctx context.Context, st idem.Store, scope string, key idem.Key) error {
	rec, err := st.Get(ctx, scope, string(key))
	if err != nil {
		if errors.Is(err, idem.ErrNotFound) {
			return nil
		}
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if !rec.LeaseExpired(now) {
		return nil
	}
	_, err = st.Finish(ctx, idem.FinishParams{Scope: rec.Scope, Key: rec.Key, Fence: rec.Fence,
		AttemptID: rec.AttemptID, State: idem.StateUnknown, CompletedAt: now})
	if errors.Is(err, idem.ErrFenced) {
		return nil // it moved on meanwhile; Resolve decides on what is there now
	}
	return err
}

// explained is an error whose message is written for the operator while
// errors.Is and errors.As still find the store's error beneath it.
type explained struct {
	msg string
	err error
}

func (e explained) Error() string { return e.msg }
func (e explained) Unwrap() error { return e.err }
