package idemgrpc

import (
	"strings"

	"github.com/idemkit/idem"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Origin is the [idem.Intent] Origin the server interceptor writes with
// every claim: the record's result is a recorded gRPC answer. A decision
// taken outside the call (reconciliation, a recovery hook, `idem resolve`)
// must be written by [EncodeDecision], which this package registers for
// Origin, so that [idem.EncodeDecision] finds it.
const Origin = "grpc"

// Trailers of a replayed decision.
const (
	// DecisionTrailer is set, on the replay of a call whose outcome was
	// decided outside the call, to the decision: "succeeded" or "failed".
	DecisionTrailer = "idem-decision"
	// DecisionBodyTrailer carries the decision's body, when it has one
	// (reconciliation's JSON naming the provider's entry, an operator's
	// body), as binary metadata.
	DecisionBodyTrailer = "idem-decision-bin"
)

func init() {
	idem.RegisterDecisionEncoder(Origin, idem.DecisionEncoderFunc(EncodeDecision))
}

// EncodeDecision encodes d as the answer a record the interceptor made
// replays, with the trailers [DecisionTrailer] and, when d has a body,
// [DecisionBodyTrailer]:
//
//   - succeeded: OK with the method's response message — d.Body decoded
//     as protojson when it is one of that type (an operator who knows the
//     response gives it so), otherwise an empty response: the handler's
//     own response was lost with the attempt, and a client learns what was
//     decided from the trailers;
//   - failed: FailedPrecondition with an ErrorInfo of reason
//     [ReasonDecidedFailed], and d.Message as the status message.
//
// d.Status and d.ContentType do not apply. The response type is found at
// replay, in the server's protobuf registry (generated code registers
// it), so the deciding program needs none of the service's types.
func EncodeDecision(d idem.Decision) ([]byte, error) {
	a := &answer{decided: true, decidedBody: d.Body, trailer: metadata.MD{DecisionTrailer: {string(d.As)}}}
	if len(d.Body) > 0 {
		a.trailer[DecisionBodyTrailer] = []string{string(d.Body)}
	}
	if d.As == idem.StateFailed {
		msg := d.Message
		if strings.TrimSpace(msg) == "" {
			msg = "the call with this idempotency key was decided as failed after its outcome was lost; retry with a new key to try again"
		}
		a.status = status.Convert(refusal(codes.FailedPrecondition, ReasonDecidedFailed, msg, nil, 0)).Proto()
		return encodeAnswer(a), nil
	}
	a.respType = string((&emptypb.Empty{}).ProtoReflect().Descriptor().FullName())
	return encodeAnswer(a), nil
}

// decidedResponse is the response a decided success replays to a call of
// fullMethod: body decoded as the method's response type, or an empty one
// of that type when body is not one; google.protobuf.Empty, whose empty
// encoding any response type decodes, when the registry does not know the
// method.
func decidedResponse(fullMethod string, body []byte) proto.Message {
	mt := responseType(fullMethod)
	if mt == nil {
		return &emptypb.Empty{}
	}
	m := mt.New().Interface()
	if len(body) > 0 && protojson.Unmarshal(body, m) != nil {
		m = mt.New().Interface() // not a response of this method: the body goes in the trailer only
	}
	return m
}

// responseType is the response message type of fullMethod
// ("/pkg.Service/Method") in the process's protobuf registry, or nil.
func responseType(fullMethod string) protoreflect.MessageType {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil
	}
	return mt
}
