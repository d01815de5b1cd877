// Package greeterpb is the example service's generated code: the protobuf
// messages (protoc-gen-go) and the starwire stubs (protoc-gen-go-starwire).
package greeterpb

//go:generate ./gen.sh
