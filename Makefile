GO      ?= go
PKGS    ?= ./...
# Packages cheap enough to run under the race detector on a 2-core machine.
RACE_PKGS ?= ./wire/... ./rpc/... ./handlers/... ./internal/... ./afxdp/...

.PHONY: all build test race bench bench-smoke generate vet fmt demo soak fuzz fuzz-smoke

all: build

build:
	$(GO) build $(PKGS)

test: vet
	$(GO) test -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

# bench-smoke runs every benchmark once, and a tiny sweep of "starwire bench"
# (every workload and protocol, client and servers in separate processes) whose
# table, JSON and charts land in BENCH_OUT.
BENCH_OUT ?= $(or $(TMPDIR),/tmp)/starwire-bench-smoke
bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime=1x -benchmem -timeout 20m $(PKGS)
	$(GO) run ./cmd/starwire bench --smoke --out $(BENCH_OUT)

# fuzz runs every fuzz target (func FuzzX in a _test.go file) for FUZZTIME
# each; FUZZ=regexp narrows them. A failure leaves its input in the package's
# testdata/fuzz, which plain go test then runs as a test. A bare "context
# deadline exceeded" at the end of a timed run, with no input written, is
# the coordinator's race described at fuzz-smoke, not a finding.
FUZZTIME ?= 1m
FUZZ     ?= .
fuzz:
	FUZZTIME=$(FUZZTIME) FUZZ='$(FUZZ)' ./.ci/fuzz

# fuzz-smoke is CI's: each target a few thousand inputs, so that a change
# that makes one fail at once cannot land. A count, not a duration: Go 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# a timed run ends while a worker is busy (golang/go#75804, fixed in 1.27),
# which a loaded CI machine hits; a count never races a deadline.
fuzz-smoke:
	FUZZTIME=3000x ./.ci/fuzz

generate:
	$(GO) generate ./...

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }

demo:
	$(GO) run ./cmd/starwire train

# soak runs starwire for SOAK_TIME under a mixed load with faults (server
# kills and restarts, a hostile peer; AF_XDP too where the machine allows)
# and fails on any lost, corrupted or hung call. Not part of test.
SOAK_TIME ?= 10m
soak:
	$(GO) run ./bench/cmd/soak -duration $(SOAK_TIME)
