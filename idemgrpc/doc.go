// Package idemgrpc makes unary gRPC calls idempotent.
package idemgrpc
