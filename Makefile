GO      ?= go
PKGS    ?= ./...
# Packages cheap enough to run under the race detector on a 2-core machine.
RACE_PKGS ?= ./wire/... ./rpc/... ./handlers/... ./internal/...

.PHONY: all build test race bench bench-smoke generate vet fmt demo

all: build

build:
	$(GO) build $(PKGS)

test: vet
	$(GO) test -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime=1x -benchmem -timeout 20m $(PKGS)

generate:
	$(GO) generate ./...

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }

demo:
	$(GO) run ./cmd/starwire train
