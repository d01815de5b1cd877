#!/bin/sh
# Regenerates greeter.pb.go (protoc-gen-go, the version pinned in go.mod)
# and greeter_starwire.pb.go (protoc-gen-go-starwire, built from this
# module). protoc must be on PATH.
set -eu

cd "$(dirname "$0")/../../.."

command -v protoc >/dev/null 2>&1 || {
	echo "greeterpb: protoc not found on PATH (e.g. apt-get install protobuf-compiler)" >&2
	exit 1
}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go-starwire" ./cmd/protoc-gen-go-starwire

protoc -I . \
	--plugin=protoc-gen-go="$(go tool -n protoc-gen-go)" \
	--plugin=protoc-gen-go-starwire="$bin/protoc-gen-go-starwire" \
	--go_out=. --go_opt=paths=source_relative \
	--go-starwire_out=. --go-starwire_opt=paths=source_relative \
	examples/greeter/greeterpb/greeter.proto
