package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/idemkit/idem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// methodField holds the call's full method name in the record's
// Intent.Fields, so that a mismatch can say the method differs.
const methodField = "grpc_method"

// server is the state of one interceptor.
type server struct {
	engine *idem.Engine
	cfg    Config
	allow  map[string]bool // Config.RecordMetadata
	// digests keys the per-field digests (Config.DigestSecret, or a
	// random one).
	digests *idem.DigestKey
}

// UnaryServerInterceptor returns an interceptor that makes the unary
// methods its rules select idempotent: the first call with a key runs the
// handler and records its answer (response or error status); a duplicate
// gets the recorded answer with the trailer idempotent-replayed: true. It
// fails when cfg is invalid, including a nil Scope.
//
// Install it with grpc.UnaryInterceptor or grpc.ChainUnaryInterceptor,
// after any authentication interceptor that Config.Scope relies on.
// Streaming methods are not covered: there is no stream interceptor.
func UnaryServerInterceptor(engine *idem.Engine, cfg Config) (grpc.UnaryServerInterceptor, error) {
	if engine == nil {
		return nil, errors.New("idemgrpc: UnaryServerInterceptor: engine is nil")
	}
	if err := cfg.fill(engine.Config().Logger); err != nil {
		return nil, err
	}
	digests, err := idem.NewDigestKey(cfg.DigestSecret)
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: Config.DigestSecret: %w", err)
	}
	s := &server{engine: engine, cfg: cfg, allow: cfg.allowList(), digests: digests}
	return s.intercept, nil
}

// rule returns the rule protecting fullMethod, or nil when it is exempt.
func (s *server) rule(fullMethod string) *Rule {
	if noSideEffects(fullMethod) {
		return nil
	}
	ru := firstMatch(s.cfg.Rules, fullMethod)
	if ru == nil || ru.Requirement == Exempt {
		return nil
	}
	return ru
}

func (s *server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ru := s.rule(info.FullMethod)
	if ru == nil {
		return handler(ctx, req)
	}
	key, err := keyFromIncoming(ctx)
	switch {
	case errors.Is(err, ErrNoKey) && ru.Requirement == Optional:
		return handler(ctx, req)
	case err != nil:
		return nil, keyError(err)
	}
	scope, err := s.cfg.Scope(ctx, info.FullMethod)
	if err != nil {
		return nil, refusal(codes.Unauthenticated, ReasonScopeMissing,
			"idempotency keys are scoped to the authenticated principal, and this call has none", nil, 0)
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, refusal(codes.Internal, ReasonRequestUnencodable, "the request is not a protobuf message", nil, 0)
	}
	fp, err := Fingerprint(info.FullMethod, msg)
	if err != nil {
		return nil, refusal(codes.Internal, ReasonRequestUnencodable, "the request cannot be encoded to fingerprint it", nil, 0)
	}
	c := &call{s: s, req: msg, handler: handler, method: info.FullMethod, op: ru.operation(info.FullMethod), scope: scope}
	res, err := s.engine.DoBytes(ctx, idem.Request{Scope: scope, Key: key, Fingerprint: fp,
		Operation: c.op, LazyIntent: c, Policy: ru.Policy}, c.effect)
	if resp, herr, ran := c.result(); ran {
		// The handler ran: its answer is the call's, recorded or not.
		if err != nil && !errors.Is(err, idem.ErrReleased) && !errors.Is(err, idem.ErrUnknownOutcome) && !errors.Is(err, idem.ErrUnknown) {
			s.cfg.Logger.Error("idemgrpc: handler answered but its outcome was not recorded; the record becomes unknown after its lease",
				"method", info.FullMethod, "err", err)
		}
		return resp, herr
	}
	switch {
	case err == nil && res.Replayed:
		return s.replay(ctx, info.FullMethod, res.Value)
	case res.Replayed && errors.Is(err, idem.ErrRecordedFailure):
		// A failed record holds an answer too: the handler's errors are
		// recorded as succeeded answers, so only a decision
		// (EncodeDecision) writes one as failed.
		return s.replay(ctx, info.FullMethod, res.Value)
	case err == nil:
		// Not reachable: without a replay the handler ran.
		return nil, status.Error(codes.Internal, "idemgrpc: internal error")
	}
	return nil, s.engineError(err, scope, info.FullMethod, msg)
}

// call is one protected call.
type call struct {
	s       *server
	req     proto.Message
	handler grpc.UnaryHandler
	method  string
	op      string
	scope   string

	mu   sync.Mutex
	ran  bool // the handler returned: resp and herr are its answer
	resp any
	herr error
}

// BuildIntent implements idem.IntentBuilder: the journal written with the
// claim names the operation and the method, and holds the request's
// per-field digests keyed for its scope (none in the global scope).
func (c *call) BuildIntent() *idem.Intent {
	f := map[string]string{methodField: c.method}
	if c.scope != "" {
		f[idem.KeyedDigestsField] = c.s.digests.Key(c.scope, fieldDigests(c.req))
	}
	return &idem.Intent{Operation: c.op, Origin: Origin, Fields: f}
}

// result returns the handler's answer once it returned. The lock keeps
// it right should the engine ever return before the effect does.
func (c *call) result() (any, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resp, c.herr, c.ran
}

type attemptKey struct{}

// AttemptFrom returns the attempt a protected handler runs under (scope,
// key, fence, and the key to forward to a provider), or nil outside one.
func AttemptFrom(ctx context.Context) *idem.Attempt {
	a, _ := ctx.Value(attemptKey{}).(*idem.Attempt)
	return a
}

// errNoAnswer replaces a handler's (nil, nil), which gRPC could not send.
var errNoAnswer = status.Error(codes.Internal, "idemgrpc: the handler returned neither a response nor an error")

// effect runs the handler under the attempt's context and maps its answer
// to the engine's vocabulary.
func (c *call) effect(ctx context.Context, a *idem.Attempt) ([]byte, error) {
	hctx := context.WithValue(ctx, attemptKey{}, a)
	var ms *metaStream
	if st := grpc.ServerTransportStreamFromContext(ctx); st != nil && c.s.allow != nil {
		ms = &metaStream{ServerTransportStream: st, allow: c.s.allow}
		hctx = grpc.NewContextWithServerTransportStream(hctx, ms)
	}
	resp, herr := c.handler(hctx, c.req)
	if herr == nil && isNil(resp) {
		resp, herr = nil, errNoAnswer
	}
	rec, outErr := c.s.outcome(ctx, resp, herr)
	if rec != nil && ms != nil {
		rec.header, rec.trailer = ms.recorded()
	}
	if rec != nil && rec.status != nil && herr == nil {
		// The response could not be recorded: answer what is.
		resp, herr = nil, status.ErrorProto(rec.status)
	}
	c.mu.Lock()
	c.ran, c.resp, c.herr = true, resp, clientError(herr)
	c.mu.Unlock()
	if outErr != nil {
		return nil, outErr
	}
	return encodeAnswer(rec), nil
}

// outcome is what the engine is told of a handler's answer: a record, or
// an error marked released or unknown.
func (s *server) outcome(ctx context.Context, resp any, herr error) (*answer, error) {
	if herr != nil {
		code := status.Code(clientError(herr))
		switch {
		case errors.Is(herr, idem.ErrReleased), errors.Is(herr, idem.ErrUnknown):
			return nil, herr
		case ctx.Err() != nil, code == codes.Canceled, code == codes.DeadlineExceeded:
			// The effect's context ended, or something it waited on
			// timed out: it may or may not have happened.
			return nil, idem.Unknown(herr)
		case slices.Contains(s.cfg.ReleaseCodes, code):
			return nil, idem.Release(herr)
		}
		return s.bounded(&answer{status: status.Convert(clientError(herr)).Proto()}, code), nil
	}
	m, ok := resp.(proto.Message)
	if !ok {
		return &answer{status: status.New(codes.Internal, "idemgrpc: the response is not a protobuf message").Proto()}, nil
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return &answer{status: status.New(codes.Internal, "idemgrpc: the response cannot be encoded").Proto()}, nil
	}
	return s.bounded(&answer{respType: string(m.ProtoReflect().Descriptor().FullName()), resp: b}, codes.OK), nil
}

// bounded returns a, or its too-large mark when its record would exceed
// Config.MaxResponse.
func (s *server) bounded(a *answer, code codes.Code) *answer {
	size := len(a.resp)
	if a.status != nil {
		size = proto.Size(a.status)
	}
	if size > s.cfg.MaxResponse {
		return &answer{tooLarge: int64(size), tooCode: code}
	}
	return a
}

// isNil reports whether a handler's response is absent: nil, or a typed
// nil message.
func isNil(resp any) bool {
	if resp == nil {
		return true
	}
	m, ok := resp.(proto.Message)
	return ok && !m.ProtoReflect().IsValid()
}

// grpcStatusError is an error that carries a gRPC status.
type grpcStatusError interface {
	error
	GRPCStatus() *status.Status
}

// clientError is the error a client is answered for herr: the status
// error it wraps (marked with idem.Release or idem.Unknown), unchanged, so
// that its message is not prefixed with the wrapper's.
func clientError(herr error) error {
	var se grpcStatusError
	if errors.As(herr, &se) {
		return se
	}
	return herr
}

// replay answers a recorded answer to a call of fullMethod, with the
// trailer that says so.
func (s *server) replay(ctx context.Context, fullMethod string, b []byte) (any, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ReplayedTrailer, "true"))
	a, err := decodeAnswer(b)
	if err != nil {
		return nil, s.unreadable(err)
	}
	if len(a.header) > 0 {
		_ = grpc.SetHeader(ctx, a.header)
	}
	if len(a.trailer) > 0 {
		_ = grpc.SetTrailer(ctx, a.trailer)
	}
	switch {
	case a.tooLarge > 0:
		return nil, refusal(codes.FailedPrecondition, ReasonResponseTooLarge,
			"the call with this idempotency key was applied, but its answer was too large to record; do not retry it with a new key",
			map[string]string{"recorded_code": a.tooCode.String()}, 0)
	case a.status != nil:
		return nil, status.ErrorProto(a.status)
	case a.decided:
		return decidedResponse(fullMethod, a.decidedBody), nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(a.respType))
	if err != nil {
		return nil, s.unreadable(err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(a.resp, m); err != nil {
		return nil, s.unreadable(err)
	}
	return m, nil
}

func (s *server) unreadable(err error) error {
	s.cfg.Logger.Error("idemgrpc: recorded answer unreadable", "err", err)
	return refusal(codes.Internal, ReasonRecordUnreadable,
		"this idempotency key has a record, but its answer cannot be decoded; it will not be run again", nil, 0)
}

// metaStream passes the metadata a handler sets through to the call's
// stream and keeps the entries Config.RecordMetadata names, whether or not
// the stream still takes them (a caller that went away does not change the
// answer recorded for its retry).
type metaStream struct {
	grpc.ServerTransportStream
	allow map[string]bool

	mu              sync.Mutex
	header, trailer metadata.MD
}

func (m *metaStream) keep(dst *metadata.MD, md metadata.MD) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, vs := range md {
		if k = strings.ToLower(k); m.allow[k] {
			if *dst == nil {
				*dst = metadata.MD{}
			}
			(*dst)[k] = append((*dst)[k], vs...)
		}
	}
}

// SetHeader implements grpc.ServerTransportStream.
func (m *metaStream) SetHeader(md metadata.MD) error {
	m.keep(&m.header, md)
	return m.ServerTransportStream.SetHeader(md)
}

// SendHeader implements grpc.ServerTransportStream.
func (m *metaStream) SendHeader(md metadata.MD) error {
	m.keep(&m.header, md)
	return m.ServerTransportStream.SendHeader(md)
}

// SetTrailer implements grpc.ServerTransportStream.
func (m *metaStream) SetTrailer(md metadata.MD) error {
	m.keep(&m.trailer, md)
	return m.ServerTransportStream.SetTrailer(md)
}

func (m *metaStream) recorded() (header, trailer metadata.MD) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.header, m.trailer
}
