package idemlambda

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/idemhttp"
)

// V1Handler handles API Gateway REST API (v1 payload) events.
type V1Handler func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// V2Handler handles API Gateway HTTP API (v2 payload) events.
type V2Handler func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// URLHandler handles Lambda Function URL events.
type URLHandler func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)

// badBody answers an event whose body is declared base64 but is not.
func badBody(err error) response {
	return problemResponse(idemhttp.TypeBodyInvalidJSON, http.StatusBadRequest, "request body unreadable",
		"the event's body is declared base64 but does not decode: "+err.Error(), 0)
}

// APIGatewayV1 wraps h (lambda.Start(w.APIGatewayV1(h))).
func (w *HTTP) APIGatewayV1(h V1Handler) V1Handler {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		body, err := decodeBody(ev.Body, ev.IsBase64Encoded)
		if err != nil {
			return v1Response(badBody(err)), nil
		}
		route := ev.Resource
		if route == "" {
			route = ev.Path
		}
		r := &Request{Method: ev.HTTPMethod, Route: route, Principal: v1Principal(&ev), Body: body,
			headers: lowerHeaders(ev.Headers), event: ev}
		resp, err := w.serve(ctx, r, func(ctx context.Context) (response, error) {
			out, err := h(ctx, ev)
			return response{Status: out.StatusCode, Headers: out.Headers, Multi: out.MultiValueHeaders, Body: out.Body, B64: out.IsBase64Encoded}, err
		})
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		return v1Response(resp), nil
	}
}

func v1Response(r response) events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{StatusCode: r.Status, Headers: r.Headers, MultiValueHeaders: r.Multi, Body: r.Body, IsBase64Encoded: r.B64}
}

// v1Principal: a Lambda authorizer's principalId, a Cognito authorizer's
// sub claim, or the IAM caller's user ARN.
func v1Principal(ev *events.APIGatewayProxyRequest) string {
	a := ev.RequestContext.Authorizer
	if s, ok := a["principalId"].(string); ok && s != "" {
		return s
	}
	if claims, ok := a["claims"].(map[string]any); ok {
		if s, ok := claims["sub"].(string); ok && s != "" {
			return s
		}
	}
	return ev.RequestContext.Identity.UserArn
}

// APIGatewayV2 wraps h (lambda.Start(w.APIGatewayV2(h))).
func (w *HTTP) APIGatewayV2(h V2Handler) V2Handler {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		body, err := decodeBody(ev.Body, ev.IsBase64Encoded)
		if err != nil {
			return v2Response(badBody(err)), nil
		}
		route := ev.RouteKey
		if route == "" || route == "$default" {
			route = ev.RawPath
		}
		r := &Request{Method: ev.RequestContext.HTTP.Method, Route: route, Principal: v2Principal(ev.RequestContext.Authorizer), Body: body,
			headers: lowerHeaders(ev.Headers), event: ev}
		resp, err := w.serve(ctx, r, func(ctx context.Context) (response, error) {
			out, err := h(ctx, ev)
			return response{Status: out.StatusCode, Headers: out.Headers, Multi: out.MultiValueHeaders, Body: out.Body, B64: out.IsBase64Encoded, Cookies: out.Cookies}, err
		})
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return v2Response(resp), nil
	}
}

func v2Response(r response) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: r.Status, Headers: r.Headers, MultiValueHeaders: r.Multi, Body: r.Body, IsBase64Encoded: r.B64, Cookies: r.Cookies}
}

// v2Principal: a JWT authorizer's sub claim, the IAM caller's user ARN,
// or a Lambda authorizer's principalId.
func v2Principal(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) string {
	switch {
	case a == nil:
		return ""
	case a.JWT != nil && a.JWT.Claims["sub"] != "":
		return a.JWT.Claims["sub"]
	case a.IAM != nil && a.IAM.UserARN != "":
		return a.IAM.UserARN
	}
	if s, ok := a.Lambda["principalId"].(string); ok {
		return s
	}
	return ""
}

// FunctionURL wraps h (lambda.Start(w.FunctionURL(h))).
func (w *HTTP) FunctionURL(h URLHandler) URLHandler {
	return func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		body, err := decodeBody(ev.Body, ev.IsBase64Encoded)
		if err != nil {
			return urlResponse(badBody(err)), nil
		}
		principal := ""
		if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil {
			principal = a.IAM.UserARN
		}
		r := &Request{Method: ev.RequestContext.HTTP.Method, Route: ev.RawPath, Principal: principal, Body: body,
			headers: lowerHeaders(ev.Headers), event: ev}
		resp, err := w.serve(ctx, r, func(ctx context.Context) (response, error) {
			out, err := h(ctx, ev)
			return response{Status: out.StatusCode, Headers: out.Headers, Body: out.Body, B64: out.IsBase64Encoded, Cookies: out.Cookies}, err
		})
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		return urlResponse(resp), nil
	}
}

func urlResponse(r response) events.LambdaFunctionURLResponse {
	return events.LambdaFunctionURLResponse{StatusCode: r.Status, Headers: r.Headers, Body: r.Body, IsBase64Encoded: r.B64, Cookies: r.Cookies}
}
