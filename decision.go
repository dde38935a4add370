package idem

import (
	"errors"
	"fmt"
	"sync"
)

// Decision is an outcome decided outside the request path — by a recovery
// hook, reconciliation or an operator — for a record whose attempt left no
// answer of its own (an unknown record). [EncodeDecision] writes it in the
// form the adapter that made the record replays, so that the retries of
// its key get the decision instead of an answer they cannot decode.
//
// What each field becomes depends on the record's origin; each adapter
// documents it beside its Origin constant. The engine's own records
// (origin "", made by [Do] and [Engine.DoBytes]) replay the application's
// value: Body for a success; Body, or Message when Body is nil, for a
// failure.
type Decision struct {
	// As is StateSucceeded or StateFailed. A release records nothing and
	// needs no encoding.
	As State
	// Body is the answer's content as the decider gives it (an HTTP body,
	// a gRPC response as protojson, an MCP tool result, an engine caller's
	// value in its codec), or nil for none.
	Body []byte
	// ContentType is Body's media type, where the origin records one.
	// Defaults to application/json for a Body that is valid JSON, else a
	// type sniffed from the bytes.
	ContentType string
	// Status is the HTTP status to answer, for origins whose answers have
	// one ("http"). Defaults to the encoder's choice (200 for succeeded,
	// 500 for failed). Other origins ignore it: a command that takes a
	// status from a person should refuse it for them.
	Status int
	// Message says why, in words: a failure's message, where the origin's
	// failures carry one (a gRPC status, an MCP tool error, an engine
	// caller's failure without a Body). Defaults to none.
	Message string
}

// DecisionEncoder writes a [Decision] as the Result that records of one
// origin replay. Each adapter that writes [Intent.Origin] registers one
// (see [RegisterDecisionEncoder]).
type DecisionEncoder interface {
	// EncodeDecision returns the Result to record for d. It refuses a
	// decision its origin cannot replay (a success without the value an
	// engine caller decodes, a status out of range) rather than write a
	// record that would replay as unreadable.
	EncodeDecision(d Decision) ([]byte, error)
}

// DecisionEncoderFunc is a function that is a [DecisionEncoder].
type DecisionEncoderFunc func(d Decision) ([]byte, error)

// EncodeDecision calls f(d).
func (f DecisionEncoderFunc) EncodeDecision(d Decision) ([]byte, error) { return f(d) }

// ErrNoDecisionEncoder: no [DecisionEncoder] is registered for a record's
// origin, so a decision cannot be written in a form its retries replay.
// The program deciding must import the adapter that made the record.
var ErrNoDecisionEncoder = errors.New("idem: no decision encoder for the record's origin")

var decisionEncoders = struct {
	sync.RWMutex
	m map[string]DecisionEncoder
}{m: map[string]DecisionEncoder{"": DecisionEncoderFunc(encodeEngineDecision)}}

// RegisterDecisionEncoder makes enc the encoder of the records whose
// intent names origin, for [EncodeDecision]. Adapters call it from an init
// function with their Origin constant, as database/sql drivers register
// themselves; a program that decides records (reconciliation, idem
// resolve) then finds the encoder of every adapter it imports. It panics
// when enc is nil or origin already has an encoder (the engine's origin,
// "", is registered by this package).
func RegisterDecisionEncoder(origin string, enc DecisionEncoder) {
	if enc == nil {
		panic("idem: RegisterDecisionEncoder: encoder is nil")
	}
	decisionEncoders.Lock()
	defer decisionEncoders.Unlock()
	if _, dup := decisionEncoders.m[origin]; dup {
		panic(fmt.Sprintf("idem: RegisterDecisionEncoder: origin %q registered twice", origin))
	}
	decisionEncoders.m[origin] = enc
}

// EncodeDecision returns the Result that records d on rec, in the form the
// adapter named by rec's origin ([Record.Origin]) replays. It fails with
// [ErrNoDecisionEncoder] when no encoder is registered for that origin,
// and when d.As is not succeeded or failed. rec's Intent must be readable
// (opened, when the store's records are encrypted).
func EncodeDecision(rec *Record, d Decision) ([]byte, error) {
	if !d.As.Terminal() {
		return nil, fmt.Errorf("idem: EncodeDecision: As must be succeeded or failed, got %q", d.As)
	}
	origin := rec.Origin()
	decisionEncoders.RLock()
	enc, ok := decisionEncoders.m[origin]
	decisionEncoders.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q: the program deciding must import the adapter that writes it", ErrNoDecisionEncoder, origin)
	}
	return enc.EncodeDecision(d)
}

// Origin is the origin rec's intent names ([Intent.Origin]): what made the
// record and so decodes its result. It is "" for a record made by an
// engine caller, and for one without a readable intent.
func (r *Record) Origin() string {
	in, err := DecodeIntent(r.Intent)
	if err != nil || in == nil {
		return ""
	}
	return in.Origin
}

// encodeEngineDecision is the encoder of origin "": an engine caller's
// value, as the application's codec wrote it. Status and ContentType do
// not apply.
func encodeEngineDecision(d Decision) ([]byte, error) {
	switch {
	case d.As == StateFailed && d.Body == nil:
		return []byte(d.Message), nil
	case d.Body == nil:
		return nil, errors.New("idem: a record made by an engine caller replays the application's value: a success needs Body, the value as the application's codec writes it")
	}
	return d.Body, nil
}
