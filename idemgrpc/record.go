package idemgrpc

import (
	"errors"
	"fmt"
	"slices"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// recordVersion is the first byte of every recorded answer.
//
// A record's Result is that byte followed by protobuf wire-format fields
// (so that a tool that reads protobuf can read it):
//
//	1 response_type  string  full name of the response message type
//	2 response       bytes   the response, deterministically encoded
//	3 status         bytes   a google.rpc.Status: the handler's error
//	4 too_large      varint  size of an answer too large to record
//	5 too_large_code varint  its status code (0: a response)
//	6 header         bytes   one recorded header entry: 1 key, 2 value
//	7 trailer        bytes   one recorded trailer entry: 1 key, 2 value
//	8 decided        bytes   the body of a decision taken outside the call
//
// A response has fields 1 and 2, an error field 3, a too-large answer
// fields 4 and 5; any of them may have 6 and 7. A decision ([EncodeDecision])
// is a response of type google.protobuf.Empty or an error, with field 8
// (present even when the body is empty): a reader replays it as the
// method's own response type, decoded from the body when it is one.
// Unknown fields are skipped.
const recordVersion = 1

// answer is what a handler returned, as recorded.
type answer struct {
	respType string
	resp     []byte
	status   *spb.Status // nil for a response
	tooLarge int64       // > 0: not recorded
	tooCode  codes.Code
	// header and trailer are the metadata the handler set that
	// Config.RecordMetadata names.
	header, trailer metadata.MD
	// decided is set for a decision taken outside the call; decidedBody
	// is its body (protojson of the response, or anything for a failure).
	decided     bool
	decidedBody []byte
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// encodeAnswer encodes a's record.
func encodeAnswer(a *answer) []byte {
	b := []byte{recordVersion}
	switch {
	case a.tooLarge > 0:
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.tooLarge))
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.tooCode))
	case a.status != nil:
		sb, _ := deterministic.Marshal(a.status) // a Status always marshals
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, sb)
	default:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, a.respType)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, a.resp)
	}
	if a.decided {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, a.decidedBody)
	}
	b = appendMD(b, 6, a.header)
	return appendMD(b, 7, a.trailer)
}

// appendMD appends md's entries as fields num, in key order.
func appendMD(b []byte, num protowire.Number, md metadata.MD) []byte {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range md[k] {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, k)
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, v)
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, e)
		}
	}
	return b
}

// consumeEntry reads one metadata entry written by appendMD.
func consumeEntry(b []byte) (k, v string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return "", "", fmt.Errorf("%w: metadata entry", errRecordFormat)
		}
		b = b[n:]
		s, n := protowire.ConsumeString(b)
		if n < 0 {
			return "", "", fmt.Errorf("%w: metadata entry", errRecordFormat)
		}
		b = b[n:]
		if num == 1 {
			k = s
		} else {
			v = s
		}
	}
	return k, v, nil
}

// errRecordFormat reports a recorded answer this version cannot read.
var errRecordFormat = errors.New("idemgrpc: recorded answer unreadable")

// decodeAnswer reads what encodeAnswer wrote.
func decodeAnswer(b []byte) (*answer, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: not format version %d", errRecordFormat, recordVersion)
	}
	a := &answer{}
	var haveStatus bool
	for b = b[1:]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case (num == 6 || num == 7) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
			}
			k, val, err := consumeEntry(v)
			if err != nil {
				return nil, err
			}
			md := &a.header
			if num == 7 {
				md = &a.trailer
			}
			if *md == nil {
				*md = metadata.MD{}
			}
			(*md)[k] = append((*md)[k], val)
			b = b[n:]
		case num == 8 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
			}
			a.decided, a.decidedBody = true, v
			b = b[n:]
		case (num == 1 || num == 2 || num == 3) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
			}
			switch num {
			case 1:
				a.respType = string(v)
			case 2:
				a.resp = v
			case 3:
				a.status = &spb.Status{}
				if err := proto.Unmarshal(v, a.status); err != nil {
					return nil, fmt.Errorf("%w: status: %v", errRecordFormat, err)
				}
				haveStatus = true
			}
			b = b[n:]
		case (num == 4 || num == 5) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
			}
			if num == 4 {
				a.tooLarge = int64(v & (1<<62 - 1))
			} else {
				a.tooCode = codes.Code(uint32(v))
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, fmt.Errorf("%w: %v", errRecordFormat, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if !haveStatus && a.tooLarge == 0 && a.respType == "" {
		return nil, fmt.Errorf("%w: neither a response nor a status", errRecordFormat)
	}
	return a, nil
}
