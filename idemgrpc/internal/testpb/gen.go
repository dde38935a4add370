// Package testpb is the generated code of idemgrpc's test service
// (payments.proto). The output is committed; regenerate it after editing
// the .proto with
//
//	go generate ./internal/testpb
//
// which needs protoc (Debian: apt-get install protobuf-compiler) and the
// two Go plugins at the pinned versions on PATH:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
package testpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative payments.proto
