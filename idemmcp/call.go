package idemmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errNotRecorded marks a call whose result is returned but not recorded,
// because no effect can have happened yet: the tool's handler never ran
// (arguments refused by the schema) or it asked for more input.
var errNotRecorded = errors.New("idemmcp: result not recorded")

// intentToolField names the intent journal field that holds the tool, so
// that a mismatch report can say the key was used for another tool; the
// arguments' digests, keyed for the call's scope, are in
// idem.KeyedDigestsField (absent in the global scope).
const intentToolField = "mcp.tool"

// call runs one call of a keyed tool through the engine.
func (g *Guard) call(ctx context.Context, next mcp.MethodHandler, method string, req *mcp.CallToolRequest) (mcp.Result, error) {
	name := req.Params.Name
	in, res, err := parseCall(req)
	if res != nil || err != nil {
		return res, err
	}
	scope, err := g.cfg.Scope(ctx, req)
	if err != nil {
		return nil, err
	}
	fp, digests, err := idem.FingerprintBody(method, name, in.body, true)
	if err != nil {
		return toolError(fmt.Sprintf("arguments are not valid JSON: %v", err)), nil
	}
	in.digests = digests
	st := &callState{key: in.key}
	fwd := withArguments(req, in.forwarded)
	out, err := g.cfg.Engine.DoBytes(withCallState(ctx, st), idem.Request{
		Scope:       scope,
		Key:         in.key,
		Fingerprint: fp,
		Operation:   "mcp.tool:" + name,
		Intent:      intentFor(name, g.digests.Key(scope, in.digests)),
		Policy:      g.cfg.Policy,
	}, func(ctx context.Context, a *idem.Attempt) ([]byte, error) {
		st.attempt = a
		return effect(ctx, next, method, fwd, st)
	})
	return g.outcome(out, err, st, scope, name, in)
}

// effect calls the tool and says what to record.
func effect(ctx context.Context, next mcp.MethodHandler, method string, req *mcp.CallToolRequest, st *callState) ([]byte, error) {
	r, err := next(ctx, method, req)
	if !st.invoked.Load() {
		return nil, idem.Release(&notRecorded{res: r, err: err})
	}
	if err != nil {
		return nil, err // the handler ran: recorded as failed (or unknown for ctx errors)
	}
	res, ok := r.(*mcp.CallToolResult)
	if !ok || res == nil {
		return nil, idem.Unknown(fmt.Errorf("idemmcp: tool returned %T, not a result", r))
	}
	if res.NeedsInput() {
		return nil, idem.Release(&notRecorded{res: res})
	}
	if res.IsError {
		// Honour the engine's vocabulary in the handler's error: Release
		// (no effect happened) frees the key, Unknown and context errors
		// leave evidence.
		herr := res.GetError()
		switch {
		case errors.Is(herr, idem.ErrReleased):
			return nil, idem.Release(&notRecorded{res: res})
		case errors.Is(herr, idem.ErrUnknown), errors.Is(herr, context.Canceled), errors.Is(herr, context.DeadlineExceeded):
			return nil, idem.Unknown(herr)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		// The effect ran but its result cannot be recorded: evidence.
		return nil, idem.Unknown(fmt.Errorf("idemmcp: encode result: %w", err))
	}
	if res.IsError {
		return nil, &recordedToolError{json: string(b), res: res}
	}
	st.first = res
	return b, nil
}

// outcome turns the engine's answer into what the client receives.
func (g *Guard) outcome(out idem.Result, err error, st *callState, scope, name string, in *parsedCall) (mcp.Result, error) {
	var (
		nr  *notRecorded
		fe  *idem.FailureError
		me  *idem.MismatchError
		ife *idem.InFlightError
	)
	switch {
	case err == nil && !out.Replayed && st.first != nil:
		return st.first, nil
	case err == nil:
		return replayed(out.Value)
	case errors.As(err, &nr):
		return nr.res, nr.err
	case errors.As(err, &fe):
		return recordedFailure(fe), nil
	case errors.As(err, &me):
		return mismatchError(in, name, g.digests.Diff(keyedDigests(me.Record), scope, in.digests), me), nil
	case errors.As(err, &ife):
		return inFlightError(in.key, ife), nil
	case errors.Is(err, idem.ErrUnknownOutcome), errors.Is(err, idem.ErrFenced), errors.Is(err, idem.ErrStoreLostClaim):
		return unknownError(in.key), nil
	case errors.Is(err, idem.ErrStoreUnavailable):
		return unavailableError(in.key), nil
	case errors.Is(err, idem.ErrInvalidKey):
		return invalidKeyError(err), nil
	}
	return nil, err
}

// notRecorded carries a result that is returned as is and not recorded.
type notRecorded struct {
	res mcp.Result
	err error
}

func (e *notRecorded) Error() string { return errNotRecorded.Error() }
func (e *notRecorded) Unwrap() error { return errNotRecorded }

// recordedToolError records a tool error result as a failed outcome whose
// message is the result's JSON, so that it replays exactly.
type recordedToolError struct {
	json string
	res  *mcp.CallToolResult
}

func (e *recordedToolError) Error() string { return e.json }

// recordedFailure rebuilds the client's result from a failed outcome: the
// recorded tool error result, or a tool error with the recorded message
// when the handler failed with a protocol error.
func recordedFailure(fe *idem.FailureError) *mcp.CallToolResult {
	var rte *recordedToolError
	if !fe.Replayed && errors.As(fe.Err, &rte) {
		return rte.res
	}
	var res mcp.CallToolResult
	if json.Unmarshal([]byte(fe.Message), &res) != nil || !res.IsError {
		res = *toolError(fe.Message)
	}
	if fe.Replayed {
		markReplayed(&res)
	}
	return &res
}

func replayed(value []byte) (*mcp.CallToolResult, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(value, &res); err != nil {
		return nil, fmt.Errorf("idemmcp: decode recorded result: %w", err)
	}
	markReplayed(&res)
	return &res, nil
}

func markReplayed(res *mcp.CallToolResult) {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaReplayed] = true
}

// parsedCall is a keyed call's arguments, split for the engine.
type parsedCall struct {
	key       idem.Key
	fromMeta  bool
	body      []byte          // arguments without the key, for the fingerprint
	digests   idem.Digests    // member digests of body, set with its fingerprint
	forwarded json.RawMessage // arguments with the effective key, for the tool
}

// parseCall extracts the key and the fingerprinted arguments. A problem the
// model can fix comes back as a tool error result; a runtime's malformed
// _meta key as a protocol error.
func parseCall(req *mcp.CallToolRequest) (*parsedCall, *mcp.CallToolResult, error) {
	raw := bytes.TrimSpace(req.Params.Arguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	// The canonical form refuses what a map decode would silently accept
	// (duplicate members, invalid strings).
	if _, err := idem.CanonicalJSON(raw); err != nil {
		return nil, toolError(fmt.Sprintf("arguments must be a valid JSON object: %v", err)), nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, toolError(fmt.Sprintf("arguments must be a valid JSON object: %v", err)), nil
	}
	in := &parsedCall{}
	if v, ok := req.Params.Meta[MetaKey]; ok {
		s, isString := v.(string)
		if !isString {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("_meta %q must be a string", MetaKey)}
		}
		if err := idem.ValidateKey(s); err != nil {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("_meta %q: %v", MetaKey, err)}
		}
		in.key, in.fromMeta = idem.Key(s), true
	}
	if !in.fromMeta {
		key, res := argumentKey(args[KeyParam])
		if res != nil {
			return nil, res, nil
		}
		in.key = key
	}
	delete(args, KeyParam)
	var err error
	if in.body, err = json.Marshal(args); err != nil {
		return nil, toolError(fmt.Sprintf("arguments: %v", err)), nil
	}
	args[KeyParam], _ = json.Marshal(string(in.key))
	in.forwarded, _ = json.Marshal(args)
	return in, nil, nil
}

func argumentKey(v json.RawMessage) (idem.Key, *mcp.CallToolResult) {
	if v == nil {
		return "", missingKeyError()
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", toolError(fmt.Sprintf("parameter %q must be a string, for example a UUID", KeyParam))
	}
	k, err := idem.ParseKey(s)
	if err != nil {
		return "", invalidKeyError(err)
	}
	return k, nil
}

// withArguments returns a copy of req whose arguments carry the effective
// key, so that the tool's schema validation sees the key even when only the
// runtime supplied it, and the handler sees the key that was used.
func withArguments(req *mcp.CallToolRequest, args json.RawMessage) *mcp.CallToolRequest {
	p := *req.Params
	p.Arguments = args
	r := *req
	r.Params = &p
	return &r
}

// intentFor is the intent of a call to the tool name whose arguments'
// digests, keyed for its scope, are keyed ("" in the global scope: none
// are kept).
func intentFor(name string, keyed string) *idem.Intent {
	f := map[string]string{intentToolField: name}
	if keyed != "" {
		f[idem.KeyedDigestsField] = keyed
	}
	return &idem.Intent{Operation: name, Origin: Origin, Fields: f}
}

// keyedDigests returns the keyed digests rec's intent holds, or "".
func keyedDigests(rec *idem.Record) string {
	if rec == nil {
		return ""
	}
	in, err := idem.DecodeIntent(rec.Intent)
	if err != nil || in == nil {
		return ""
	}
	return in.Fields[idem.KeyedDigestsField]
}
