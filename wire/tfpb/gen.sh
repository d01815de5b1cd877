#!/bin/sh
# Regenerates the Go code for the .proto files in this directory.
#
# protoc must be on PATH. The Go plugins are the versions pinned as tool
# dependencies in go.mod ("go tool -n" builds them into the build cache and
# prints their paths), so every machine generates identical code.
set -eu

cd "$(dirname "$0")/../.."

command -v protoc >/dev/null 2>&1 || {
	echo "tfpb: protoc not found on PATH (e.g. apt-get install protobuf-compiler)" >&2
	exit 1
}

gen_go=$(go tool -n protoc-gen-go)
gen_grpc=$(go tool -n protoc-gen-go-grpc)

protoc -I . \
	--plugin=protoc-gen-go="$gen_go" \
	--plugin=protoc-gen-go-grpc="$gen_grpc" \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	wire/tfpb/*.proto
