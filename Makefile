GO      ?= go
PKGS    ?= ./...
# Packages cheap enough to run under the race detector on a 2-core machine.
# The slowest come first (go test starts packages in the order given),
# rpc's before afxdp's, whose copy without the race detector starts
# first in its pass: the two afxdp packages at once beside a loaded
# machine starve each other's peers.
RACE_PKGS ?= ./rpc/... ./afxdp/... ./handlers/... ./internal/... ./wire/...
# RACE_SEQUENTIAL are packages of RACE_PKGS whose code and tests start no
# goroutine and share nothing, where the race detector finds nothing: each
# cost the pass a link and a second at exit for no check.
RACE_SEQUENTIAL ?= wire/status internal/units internal/cpuclock internal/capabilities \
	internal/packet handlers/tensor handlers/checkpoint/table
MODULE := github.com/starwire/starwire
# STATICCHECK_VERSION is the staticcheck (honnef.co/go/tools) that vet runs,
# installed from the Go module proxy into GOBIN by the tools target.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK = $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck
# Test binaries of up to TEST_P packages run at once in each pass of test
# (go test's -p, whose default is the number of CPUs): most tests wait on
# sockets, timers and child processes more than they compute, so a 2-core
# machine has room for more than two.
TEST_P  ?= 3
# SLOW_PKGS start first in the pass without the race detector when PKGS
# is the whole module (go test starts packages in the order given, and
# lists each once): cmd/starwire alone takes a third of the pass, and
# started last it ended the pass.
SLOW_PKGS ?= ./cmd/starwire/ ./afxdp/ ./afxdp/afxdprpc/
PLAIN_PKGS = $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS)
# TEST_PARALLEL is -parallel in that pass: cmd/starwire's parallel tests
# each wait on processes of their own (a task restarting, a probe timing
# out) more than they compute, and go test's default of GOMAXPROCS runs
# two at a time.
TEST_PARALLEL ?= 4
# TEST_JOBS passes of test run at once; 1 runs them one after another.
TEST_JOBS ?= 3
# The stress tests (separate processes moving gigabytes, call overruns
# bounded by the lateness they measure) run after the other passes, in a
# window of their own: beside the race pass, a CPU it starves for a second
# at a time made a bulk call overrun 1.3 s against 0.27 s of lateness the
# test then measured in its own process only. Their bounds now grow with
# the lateness of both the client's and the server's process, measured in
# the same run, so the STRESS_P stress packages run beside each other.
STRESS  ?= ^TestStress
STRESS_PKGS ?= ./bench/stress/ ./afxdp/afxdprpc/
STRESS_P ?= 2
# STRESS_PARALLEL is the stress tests' -parallel: bench/stress runs its
# attacks, each against a server process of its own, all at once.
STRESS_PARALLEL ?= 8

# pipefail: a test pass piped through sed (which labels its lines) fails
# when go test does.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

# TF_VENV is the virtual environment of the interoperability suite with
# real TensorFlow (interop/tf), made from its pinned requirements.
TF_VENV ?= $(CURDIR)/.venv-tf
TF_PYTHON ?= python3

.PHONY: all build tools test test-tf bench-tf test-plain test-race test-deploy test-stress flake race bench bench-smoke generate vet fmt demo soak fuzz fuzz-smoke

all: build

build:
	$(GO) build $(PKGS)

# test runs its three passes at once, each labelling its lines: every
# package without the race detector, RACE_PKGS with it, and deploy's
# module; then the stress tests, apart from the rest. go test prints a
# line per package as its tests end.
test: vet
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) test-plain test-race test-deploy
	@$(MAKE) --no-print-directory test-stress

test-plain:
	$(GO) test -count=1 -p $(TEST_P) -parallel $(TEST_PARALLEL) -skip '$(STRESS)' -timeout 20m $(PLAIN_PKGS) 2>&1 | sed -u 's/^/plain  /'

# GORACE's atexit_sleep_ms=0: the race detector otherwise waits a second
# as each test binary exits, for reports from goroutines still running,
# and testwait.VerifyTestMain has already failed a binary that leaves any.
test-race:
	GORACE='atexit_sleep_ms=0 $(GORACE)' $(GO) test -count=1 -race -p $(TEST_P) -skip '$(STRESS)' -timeout 20m \
		$$($(GO) list $(RACE_PKGS) | grep -vxE '$(MODULE)/($(subst $() ,|,$(strip $(RACE_SEQUENTIAL))))') 2>&1 | sed -u 's/^/race   /'

test-stress:
	$(GO) test -count=1 -p $(STRESS_P) -parallel $(STRESS_PARALLEL) -run '$(STRESS)' -timeout 20m $(STRESS_PKGS) 2>&1 | sed -u 's/^/stress /'

# test-tf runs the interoperability suite: real TensorFlow processes
# (workers, masters, ps) against starwire tasks, each its own process.
# STARWIRE_REQUIRE_TF=1 (CI sets it) makes a missing TensorFlow a failure.
test-tf: $(TF_VENV)/.installed
	cd interop/tf && $(TF_VENV)/bin/python -m pytest -q $(TF_TESTS)

# bench-tf runs the same job on TensorFlow's ps and on starwire's,
# alternating, and prints the table BENCHMARKS.md keeps.
bench-tf: $(TF_VENV)/.installed
	cd interop/tf && $(TF_VENV)/bin/python bench_tf.py $(BENCH_TF_FLAGS)

$(TF_VENV)/.installed: interop/tf/requirements.txt
	$(TF_PYTHON) -m venv $(TF_VENV)
	$(TF_VENV)/bin/pip install -q --disable-pip-version-check -r interop/tf/requirements.txt
	touch $@

test-deploy:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./... 2>&1 | sed -u 's/^/deploy /'

# flake reruns the tests of PKGS COUNT times beside two CPU hogs (killed
# after), which make goroutines run late as a loaded CI machine does, to
# find tests that hold only when they run promptly. It ends with how many
# runs each failing test failed. FLAKE_RUN narrows the tests (go test
# -run), FLAKE_FLAGS adds flags (e.g. -race).
COUNT       ?= 10
FLAKE_RUN   ?= .
FLAKE_FLAGS ?=
flake:
	@hogs=; trap 'kill $$hogs 2>/dev/null' EXIT; \
	for i in 1 2; do yes >/dev/null & hogs="$$hogs $$!"; done; \
	out=$$(mktemp); rc=0; \
	$(GO) test -count=$(COUNT) -run '$(FLAKE_RUN)' $(FLAKE_FLAGS) -timeout 60m $(PKGS) 2>&1 | tee $$out || rc=$$?; \
	echo "flake: $(COUNT) runs of $(PKGS) beside 2 CPU hogs; failures per test:"; \
	fails=$$(grep -E '^ *--- FAIL' $$out | sed -E 's/^ *--- FAIL: //; s/ \(.*//' | sort | uniq -c | sort -rn || true); \
	echo "$${fails:-  none}"; \
	rm -f $$out; exit $$rc

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

# bench-smoke runs every benchmark once, and a tiny sweep of "starwire bench"
# (every workload and protocol, client and servers in separate processes) whose
# table and JSON land in BENCH_OUT, then bench/cmd/charts draws its charts there.
BENCH_OUT ?= $(or $(TMPDIR),/tmp)/starwire-bench-smoke
bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime=1x -benchmem -timeout 20m $(PKGS)
	$(GO) run ./cmd/starwire bench --smoke --out $(BENCH_OUT)
	$(GO) run ./bench/cmd/charts -formats png,svg $(BENCH_OUT)/results.json

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

# tools installs the pinned staticcheck, unless it is there already.
tools:
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))' || \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# vet runs go vet and staticcheck on both modules (the checks are those of
# staticcheck's defaults, narrowed by a staticcheck.conf where a package
# needs it). It also fails when the command links package testing: test
# helpers live in packages only tests import (internal/netns/netnstest).
vet: tools
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	cd deploy && $(STATICCHECK) ./...
	@deps=$$($(GO) list -deps ./cmd/starwire); ! grep -qx testing <<<"$$deps" || { echo 'cmd/starwire links package testing'; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }

demo:
	$(GO) run ./cmd/starwire train

# soak runs starwire for SOAK_TIME under a mixed load with faults (server
# kills and restarts, a hostile peer; AF_XDP too where the machine allows)
# and fails on any lost, corrupted or hung call. Not part of test.
SOAK_TIME ?= 10m
soak:
	$(GO) run ./bench/cmd/soak -duration $(SOAK_TIME)
